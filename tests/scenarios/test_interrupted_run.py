"""An interrupted test run leaves nothing behind: SIGTERM (a CI timeout) or SIGINT (Ctrl-C).

A child `pytest` runs `tests/fixtures/interrupted_session.py`, which starts a broker of its own (the
SIGTERM case), a `replayd` and a local job, writes their pids and waits. The child is interrupted;
once it has exited, none of those pids may still name a live process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.interrupted_session import PIDS_ENV
from tests.fixtures.kafka import BOOTSTRAP_ENV
from tests.fixtures.leftovers import process_running

pytestmark = [pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[2]
CHILD = ROOT / "tests" / "fixtures" / "interrupted_session.py"


@pytest.mark.parametrize(
    ("interrupt", "own_broker"),
    [(signal.SIGTERM, True), (signal.SIGINT, False)],
    ids=["sigterm-own-broker", "sigint"],
)
def test_an_interrupted_pytest_stops_everything_it_started(
    tmp_path: Path, kafka_bootstrap: str, interrupt: signal.Signals, own_broker: bool
) -> None:
    pids_file = tmp_path / "pids.json"
    env = {key: value for key, value in os.environ.items() if not key.startswith("REPLAY_")}
    env[PIDS_ENV] = str(pids_file)
    if not own_broker:
        env[BOOTSTRAP_ENV] = kafka_bootstrap  # the SIGINT case shares this session's broker
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "t"),
         str(CHILD)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not pids_file.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert pids_file.exists(), (
            child.communicate(timeout=30)[0][-3000:] if child.poll() is not None else ""
        )
        pids: dict[str, list[int]] = json.loads(pids_file.read_text())
        assert all(process_running(pid) for group in pids.values() for pid in group), pids

        child.send_signal(interrupt)
        output, _ = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

    settle = time.monotonic() + 5  # a process signalled last may take a moment to be reaped
    while time.monotonic() < settle and any(process_running(p) for group in pids.values() for p in group):
        time.sleep(0.2)
    survivors = {name: [p for p in group if process_running(p)] for name, group in pids.items()}
    assert not any(survivors.values()), f"{survivors} outlived the interrupted run:\n{output[-2000:]}"
    assert set(pids) == ({"replayd", "job", "broker"} if own_broker else {"replayd", "job"})
