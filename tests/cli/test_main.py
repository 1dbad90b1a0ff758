"""The `replay` command line against a real daemon: exit codes, output, a followed replay."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from daemon.cli.main import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, main
from tests.fixtures.daemon import OWNER, STRANGER, DaemonProcess
from tests.fixtures.kafka import consume_all, value_of
from tests.fixtures.runs import window_event_ids

pytestmark = [pytest.mark.kafka]


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, replay_daemon: DaemonProcess) -> DaemonProcess:
    monkeypatch.setenv("REPLAY_DAEMON_URL", replay_daemon.url)
    monkeypatch.setenv("REPLAY_API_TOKEN", replay_daemon.token)
    monkeypatch.setenv("REPLAY_USER", OWNER)
    return replay_daemon


@pytest.mark.spark
def test_followed_replay_exits_zero_and_the_topic_holds_the_window_and_its_proof(
    cli_env: DaemonProcess, kafka_bootstrap: str, sample_table: Path, tmp_path: Path
) -> None:
    code, out, err = _run(["orders", "2024-01-07", "tps=3k", "--follow", "--json"])

    assert code == EXIT_OK, err
    final = json.loads(out.strip().splitlines()[-1])
    expected = window_event_ids(sample_table, "2024-01-07", "2024-01-07")
    assert final["state"] == "succeeded"
    assert final["confirmed"] == len(expected)
    landed = consume_all(kafka_bootstrap, final["topic"], expected=len(expected))
    assert {json.loads(value_of(m))["event_id"] for m in landed} == expected
    assert final["reconcile"]["missing"] == final["reconcile"]["unexpected"] == 0
    assert final["reconcile"]["found"] == len(expected) and final["duplicates"] == 0

    chart = tmp_path / "run.png"
    code, out, err = _run(["chart", final["id"], "-o", str(chart)])
    assert code == EXIT_OK, err
    assert chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and str(chart) in out
    code, _, err = _run(["chart", final["id"]])
    assert code == EXIT_BAD_INPUT and "-o <file>.png" in err

    code, out, err = _run(["reconcile", final["id"], "--follow"])
    assert code == EXIT_OK, err
    assert "reconcile: clean: every one of" in out


@pytest.mark.parametrize(
    ("argv", "token"),
    [
        (["orders", "2024-01-07..2024-01-01"], "`2024-01-07..2024-01-01`"),
        (["orders", "2024-01-01", "tps=abc"], "`tps=abc`"),
        (["orders", "2024-01-01", "speed=9"], "`speed=9`"),
        ([], "no command given"),
    ],
)
def test_bad_input_exits_two_naming_the_token(cli_env: DaemonProcess, argv: list[str], token: str) -> None:
    before = cli_env.client().list_replays(OWNER).runs

    code, _, err = _run(argv)

    assert code == EXIT_BAD_INPUT
    assert token in err
    assert "Usage: /replay" in err
    assert cli_env.client().list_replays(OWNER).runs == before


def test_unknown_source_from_the_daemon_exits_two(cli_env: DaemonProcess) -> None:
    code, _, err = _run(["ordres", "2024-01-01"])

    assert code == EXIT_BAD_INPUT
    assert "unknown source 'ordres'" in err


def test_refused_user_exits_one(cli_env: DaemonProcess) -> None:
    code, _, err = _run(["--as", STRANGER, "orders", "2024-01-01"])

    assert code == EXIT_FAILED
    assert "only the owners of 'orders'" in err


def test_plan_prints_rows_and_eta(cli_env: DaemonProcess, sample_table: Path) -> None:
    code, out, _ = _run(["plan", "orders", "2024-01-02", "tps=100", "--json"])

    plan = json.loads(out)
    assert code == EXIT_OK
    assert plan["rows"] == len(window_event_ids(sample_table, "2024-01-02", "2024-01-02"))
    assert plan["eta_publish_s"] == pytest.approx(plan["rows"] / 100)
    parts = plan["eta_startup_s"] + plan["eta_publish_s"] + plan["eta_finish_s"]
    assert plan["eta_s"] == pytest.approx(parts)
    assert plan["eta_startup_s"] > 0  # start-up is part of the estimate, never left out


def test_daemon_down_exits_one_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAY_DAEMON_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("REPLAY_API_TOKEN", "x")
    monkeypatch.setenv("REPLAY_USER", OWNER)

    code, _, err = _run(["status", "r-0123456789ab"])

    assert code == EXIT_FAILED
    assert "is not reachable" in err


def test_pipeline_life_from_the_command_line(cli_env: DaemonProcess) -> None:
    code, out, _ = _run(["schedule", "orders", "every=1h", "watermark=updated_at", "lookback=30m", "--json"])
    pipeline = json.loads(out)

    listed_code, listed, _ = _run(["pipelines", "mine"])
    paused_code, paused, _ = _run(["pause", pipeline["id"]])
    refused, _, refusal = _run(["unschedule", pipeline["id"]])
    archived_code, archived, _ = _run(["unschedule", pipeline["id"], "--yes", "--json"])

    assert (code, listed_code, paused_code, archived_code) == (EXIT_OK,) * 4
    assert (pipeline["schedule"], pipeline["lookback_seconds"]) == ("every=1h", 1800)
    assert pipeline["id"] in listed
    assert f"{pipeline['id']} paused" in paused
    assert refused == EXIT_BAD_INPUT
    assert "add --yes to confirm" in refusal
    assert json.loads(archived)["state"] == "archived"
