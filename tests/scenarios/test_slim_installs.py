"""Slim installs: `pip install .[bot]` and `.[cli]` give a working bot and CLI without the heavy stack.

The first test runs `scripts/check-slim-installs` for real (wheel, cached venvs, a signed `/replay help`
through the bot, `replay help` through the CLI); the second shows that a failing import is reported
with the project module that pulled the missing package, not just the package.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "check-slim-installs"
PROBE_DIR = REPO_ROOT / "scripts"


def test_the_bot_and_cli_installs_work_without_spark_aws_or_a_database() -> None:
    result = subprocess.run(
        ["bash", str(SCRIPT)],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert "[bot] a signed /replay help is answered with the usage text" in result.stdout
    assert "[cli] 'replay help' prints the usage" in result.stderr


def test_a_missing_dependency_is_reported_with_the_module_that_imported_it(tmp_path: Path) -> None:
    package = tmp_path / "bot"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "server.py").write_text("import bot.app\n")
    (package / "app.py").write_text("import heavy_library_nobody_installed\n")
    probe = (
        "import slim_probe\n"
        "try:\n"
        "    slim_probe.import_entry('bot', 'bot.server')\n"
        "except slim_probe.ProbeFailure as failure:\n"
        "    print(failure)\n"
    )

    result = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{PROBE_DIR}"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    assert "needs 'heavy_library_nobody_installed'" in result.stdout
    assert "imported by: bot.app" in result.stdout
    assert "import chain: bot.server -> bot.app -> heavy_library_nobody_installed" in result.stdout
