"""Where an executor's Python worker spends its time, sampled with py-spy while a real run publishes.

bench/e2e.py ``--profile DIR`` attaches one ``py-spy record --subprocesses`` to the job's
``pyspark.daemon`` (the process that forks every Python worker, so each task's worker is sampled
too) as soon as it appears in the job's process session, and stops it when the run ends. The raw
samples (``DIR/<run>.txt``, py-spy's collapsed stacks, one per line) are then summarised:

    profile samples= rate_hz= workers=
    profile-self share= frame=          # the frames the samples ended in: where the time is spent
    profile-total share= frame=         # the product's frames the samples passed through

A sample is one look at one thread running (py-spy leaves out the ones waiting in a poll or a
sleep), so a share is of the workers' CPU time; a self frame names its line, which says which call.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

from bench.daemon_harness import session_of, session_pids

PY_SPY = str(Path(sys.executable).with_name("py-spy"))
RATE_HZ = 250
FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
OWN = ("spark_job/",)  # the product's own frames, for the inclusive table


class WorkerProfiler:
    """py-spy on the job's Python workers for one run (``watch``, then ``stop``)."""

    def __init__(self, runs_dir: Path, out_dir: Path) -> None:
        self._runs_dir = runs_dir
        self._out_dir = out_dir
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._attach, daemon=True)
        self._spies: list[subprocess.Popen[bytes]] = []
        self.files: list[Path] = []

    def watch(self, run_id: str) -> None:
        self._out_dir.mkdir(parents=True, exist_ok=True)
        self._run_id = run_id
        self._thread.start()

    def _attach(self) -> None:
        attached: set[int] = set()
        while not self._stop.wait(0.05):
            session = session_of(self._runs_dir / self._run_id)
            if session is None:
                continue
            for pid, command in session_pids(session):
                if pid in attached or "pyspark.daemon" not in command:
                    continue
                attached.add(pid)
                out = self._out_dir / f"{self._run_id}-{pid}.txt"
                self.files.append(out)
                spy_command = [PY_SPY, "record", "--pid", str(pid), "--subprocesses", "--nonblocking"]
                spy_command += ["--rate", str(RATE_HZ), "--format", "raw", "--output", str(out)]
                spy = subprocess.Popen(spy_command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                self._spies.append(spy)

    def stop(self) -> list[Path]:
        """Stop sampling (py-spy writes its file on SIGINT, or when its target has exited)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for spy in self._spies:
            if spy.poll() is None:
                spy.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                spy.wait(timeout=30)
        return [path for path in self.files if path.exists()]


def frames(stack: str) -> list[tuple[str, str, str]]:
    """A collapsed stack's frames, outermost first, as (function, file, line); py-spy's process and
    thread pseudo-frames dropped."""
    found = []
    for part in stack.split(";"):
        match = FRAME.match(part)
        if match is None or part.startswith(("process ", "thread ")):
            continue
        found.append((match["function"], _short(match["file"]), match["line"] or "?"))
    return found


def _short(file: str) -> str:
    """A path from the package down (site-packages and the checkout left off)."""
    for root in ("site-packages/", "spark_job/", "pyspark/"):
        if root in file:
            return file[file.index(root) :].removeprefix("site-packages/")
    return Path(file).name


def summary(files: list[Path], top: int = 15) -> list[str]:
    """The ``profile`` lines for the samples in ``files``."""
    leaves: Counter[str] = Counter()
    through: Counter[str] = Counter()
    total = 0
    workers: set[str] = set()
    for path in files:
        for line in path.read_text(errors="replace").splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not count_text.isdigit():
                continue
            count = int(count_text)
            head = stack.split(";", 1)[0]
            if head.startswith("process "):
                workers.add(head.split(":", 1)[0])
            stack_frames = frames(stack)
            if not stack_frames:
                continue
            total += count
            function, file, line = stack_frames[-1]
            leaves[f"{function} ({file}:{line})"] += count
            for name in {f"{f} ({p})" for f, p, _ in stack_frames if p.startswith(OWN)}:
                through[name] += count
    if not total:
        return ["profile samples=0 (py-spy saw no worker: was the run too short to attach?)"]
    lines = [f"profile samples={total} rate_hz={RATE_HZ} workers={len(workers)}"]
    lines += [f"profile-self share={n / total:.3f} frame={name}" for name, n in leaves.most_common(top)]
    lines += [f"profile-total share={n / total:.3f} frame={name}" for name, n in through.most_common(top)]
    return lines
