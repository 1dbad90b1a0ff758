"""The local launcher's admission default and its job monitor (a real child process, a real file)."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from daemon.adapters.local_launcher import _watch_job, default_max_concurrent_runs

GIB = 1024**3


def test_default_cap_is_one_job_per_two_cores_and_two_gib() -> None:
    assert default_max_concurrent_runs(cores=2, memory_bytes=8 * GIB) == 1
    assert default_max_concurrent_runs(cores=16, memory_bytes=64 * GIB) == 8
    assert default_max_concurrent_runs(cores=16, memory_bytes=6 * GIB) == 3  # memory bounds it
    assert default_max_concurrent_runs(cores=1, memory_bytes=1 * GIB) == 1  # never zero


def test_default_cap_reads_this_machine() -> None:
    assert default_max_concurrent_runs() >= 1


def test_the_monitor_wakes_the_watcher_at_the_result_line_then_at_exit(tmp_path: Path) -> None:
    stdout = tmp_path / "stdout.log"
    with stdout.open("wb") as out:
        process = subprocess.Popen(
            ["sh", "-c", 'sleep 0.3; echo "REPLAY_RESULT {\\"status\\": \\"succeeded\\"}"; sleep 1.5'],
            stdout=out,
        )
    wakes: list[float] = []
    monitor = threading.Thread(
        target=_watch_job,
        args=(stdout, lambda: process.poll() is None, lambda: wakes.append(time.monotonic())),
    )
    started = time.monotonic()
    monitor.start()
    monitor.join(timeout=10)
    exited = time.monotonic()

    assert not monitor.is_alive()
    assert len(wakes) == 2
    assert wakes[0] - started < 1.0  # at the line, well before the process ended
    assert exited - wakes[1] < 0.5 and wakes[1] - wakes[0] > 1.0
