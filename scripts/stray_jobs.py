"""Stopping what a run of the tests or of a bench started, however the run ends.

SIGTERM (what a CI timeout or `kill` sends) ends a Python process on the spot, skipping every
`finally`; `interrupt_on_sigterm` turns it into KeyboardInterrupt so teardowns run. A daemon's local
jobs lead their own process groups and outlive it by design (a restarted daemon re-attaches), so
whoever started the daemon for a test or a bench stops them too: `stop_jobs`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from types import FrameType

from daemon.adapters.local_standby import process_start_ticks

GRACE_S = 10.0  # how long a process group gets after SIGTERM before SIGKILL


def interrupt_on_sigterm() -> None:
    """The first SIGTERM raises KeyboardInterrupt in the main thread; later ones are ignored, so the
    teardown it starts is not itself cut short."""

    def interrupt(_signum: int, _frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, interrupt)


def job_pids(runs_dir: Path) -> list[int]:
    """The live local jobs recorded under ``runs_dir``, and the standby drivers beside it: a pid file's
    pid whose start ticks still match (a recycled pid is some other process, never signalled)."""
    alive = []
    standbys = runs_dir.parent / "standby"
    pid_files = [*runs_dir.glob("r-*/pid"), *standbys.glob("s-*/pid")]
    for pid_file in sorted(set(pid_files)):
        with contextlib.suppress(OSError, ValueError):
            pid, ticks = pid_file.read_text().split()[:2]
            if process_start_ticks(int(pid)) == int(ticks):
                alive.append(int(pid))
    return alive


def stop_jobs(runs_dir: Path) -> list[int]:
    """Stop every live job recorded under ``runs_dir`` (its whole process group); their pids."""
    pids = job_pids(runs_dir)
    for pid in pids:
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(process_running(pid) for pid in pids):
        time.sleep(0.2)
    for pid in pids:
        if process_running(pid):
            _signal_group(pid, signal.SIGKILL)
    return pids


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # the job leads its own session: Spark's JVM and Python workers go too


def process_running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return False
