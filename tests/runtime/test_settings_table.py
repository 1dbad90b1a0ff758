"""The one table of `REPLAY_*` settings in docs/production.md is what the settings model says.

Change a setting (a name, a default, a bound, a description) and these fail until
`.venv/bin/python scripts/settings_table.py` has rewritten the table.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from daemon.config.settings import Settings
from scripts.settings_table import END, GUIDE, START, main, missing_descriptions, render_table, replace_block

ROOT = Path(__file__).resolve().parents[2]
# Written in the sources but not settings: the job's result markers, and `REPLAY_EMR__` in messages.
NOT_SETTINGS = {"REPLAY_RESULT", "REPLAY_FAILED", "REPLAY_EMR__"}


def test_the_checked_in_table_is_the_generated_one() -> None:
    checked_in = GUIDE.read_text(encoding="utf-8")
    assert replace_block(checked_in, render_table()) == checked_in


def test_every_setting_says_what_it_is_for() -> None:
    assert missing_descriptions() == []


def test_every_replay_variable_named_in_the_code_is_in_the_table() -> None:
    table = render_table()
    named = {
        name
        for package in ("bot", "daemon", "store", "spark_job")
        for path in (ROOT / package).rglob("*.py")
        for name in re.findall(r"\bREPLAY_[A-Z0-9_]+", path.read_text(encoding="utf-8"))
    }
    assert named - NOT_SETTINGS
    assert sorted(name for name in named - NOT_SETTINGS if f"`{name}`" not in table) == []


def test_the_table_shows_defaults_bounds_choices_and_secrets() -> None:
    rows = {row.split("`")[1]: row for row in render_table().splitlines() if row.startswith("| `")}
    max_tps = Settings.model_fields["max_tps"]
    assert rows["REPLAY_MAX_TPS"].startswith(f"| `REPLAY_MAX_TPS` | `{max_tps.default:,}` | integer > 0")
    assert rows["REPLAY_MAX_TPS"].endswith(f" | {max_tps.description} |")
    assert "`console`, `json`" in rows["REPLAY_LOG_FORMAT"]
    assert "number ≥ 0.5, ≤ 30" in rows["REPLAY_CONTROL_LEAD_S"]
    assert "**secret**" in rows["REPLAY_SLACK_SIGNING_SECRET"]
    assert "`replay`" in rows["REPLAY_EMR__PREFIX"]


def test_a_stale_table_fails_the_check_and_the_script_rewrites_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text(f"# Guide\n\n{START}\n| `REPLAY_GONE` | — | text | an old row |\n{END}\n\nAfter.\n")

    assert main(["--check", "--path", str(guide)]) == 1
    assert "stale" in capsys.readouterr().err
    assert main(["--path", str(guide)]) == 0
    assert guide.read_text() == f"# Guide\n\n{render_table()}\n\nAfter.\n"
    assert main(["--check", "--path", str(guide)]) == 0


def test_a_file_without_its_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="marker"):
        replace_block("no markers here", render_table())
