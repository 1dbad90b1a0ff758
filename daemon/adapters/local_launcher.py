"""`LocalSparkLauncher`: the job under `spark-submit --master local[W]`, exactly as on a cluster.

Each job runs in its own process session, so it outlives a daemon restart; everything needed to
re-attach (pid, its start time, file paths) is in the handle stored with the run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import structlog

import spark_job
from daemon.usecases.ports import Handle, JobOutcome, JobState, Launcher, parse_outcome

log = structlog.get_logger(__name__)

JOB_ENTRY = Path(spark_job.__file__).parent / "main.py"


def default_spark_submit() -> str:
    """The `spark-submit` installed with pyspark beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "spark-submit"
    return str(beside) if beside.exists() else "spark-submit"


def _process_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks: with the pid, it names one process, never a recycled pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


class LocalSparkLauncher(Launcher):
    kind = "local"

    def __init__(
        self,
        *,
        runs_dir: Path,
        spark_submit: str | None = None,
        task_retries: int = 2,
        extra_conf: dict[str, str] | None = None,
    ) -> None:
        self._runs_dir = runs_dir
        self._spark_submit = spark_submit or default_spark_submit()
        self._task_retries = task_retries
        self._extra_conf = extra_conf or {}

    def run_dir(self, run_id: str) -> Path:
        return self._runs_dir / run_id

    def result_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / "result.json"

    def submit(self, run_id: str, spec_json: str, *, workers: int) -> Handle:
        directory = self.run_dir(run_id)
        pid_file = directory / "pid"
        if pid_file.exists():  # submitted before a restart: re-attach, never start twice
            return self._handle(run_id, int(pid_file.read_text().split()[0]))
        directory.mkdir(parents=True, exist_ok=True)
        spec_path = directory / "spec.json"
        spec_path.write_text(spec_json, encoding="utf-8")
        command = [
            self._spark_submit,
            "--master",
            f"local[{workers},{self._task_retries}]",
            "--name",
            f"replay-{run_id}",
            "--conf",
            "spark.speculation=false",
            "--conf",
            "spark.ui.enabled=false",
            *[arg for key, value in self._extra_conf.items() for arg in ("--conf", f"{key}={value}")],
            str(JOB_ENTRY),
            str(spec_path),
        ]
        with (directory / "stdout.log").open("ab") as out, (directory / "stderr.log").open("ab") as err:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=self._environment(),
            )
        tmp = pid_file.with_suffix(".tmp")
        tmp.write_text(f"{process.pid} {_process_start_ticks(process.pid)}\n")
        tmp.replace(pid_file)
        log.info("job started", run_id=run_id, pid=process.pid, workers=workers)
        return self._handle(run_id, process.pid)

    @staticmethod
    def _environment() -> dict[str, str]:
        """Driver and executors run this interpreter, whose environment has the job's dependencies."""
        return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}

    def _handle(self, run_id: str, pid: int) -> Handle:
        directory = self.run_dir(run_id)
        ticks = (directory / "pid").read_text().split()
        return {
            "kind": self.kind,
            "run_id": run_id,
            "pid": pid,
            "start_ticks": int(ticks[1]) if len(ticks) > 1 and ticks[1] != "None" else None,
            "stdout": str(directory / "stdout.log"),
            "stderr": str(directory / "stderr.log"),
            "spec": str(directory / "spec.json"),
            "result": str(self.result_path(run_id)),
        }

    def _alive(self, handle: Handle) -> bool:
        pid = int(handle["pid"])
        with contextlib.suppress(ChildProcessError):
            done, _ = os.waitpid(pid, os.WNOHANG)  # reap our own child so it does not linger as a zombie
            if done == pid:
                return False
        ticks = _process_start_ticks(pid)
        return ticks is not None and (handle.get("start_ticks") in (None, ticks))

    def state(self, handle: Handle) -> JobState:
        if self._alive(handle):
            return JobState.RUNNING
        return JobState.EXITED if Path(handle["stdout"]).exists() else JobState.LOST

    def outcome(self, handle: Handle) -> JobOutcome | None:
        try:
            with Path(handle["stdout"]).open(encoding="utf-8", errors="replace") as lines:
                return parse_outcome(lines)
        except FileNotFoundError:
            return None

    def log_tail(self, handle: Handle, lines: int = 20) -> list[str]:
        try:
            with Path(handle["stderr"]).open(encoding="utf-8", errors="replace") as text:
                return [line.rstrip("\n") for line in deque(text, maxlen=lines)]
        except FileNotFoundError:
            return []

    def cancel(self, handle: Handle, grace_s: float = 10.0) -> None:
        if not self._alive(handle):
            return
        pid = int(handle["pid"])
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self._alive(handle):
            time.sleep(0.2)
        if self._alive(handle):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        log.info("job cancelled", run_id=handle.get("run_id"), pid=pid)
