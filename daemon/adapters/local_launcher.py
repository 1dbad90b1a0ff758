"""`LocalSparkLauncher`: the job under `spark-submit --master local[W]`, exactly as on a cluster.

Each job runs in its own process session, so it outlives a daemon restart; everything needed to
re-attach (pid, its start time, file paths) is in the handle stored with the run.

Launched once: the job's own process writes its pid file (a shell line before it execs
`spark-submit`), and it holds an exclusive lock on the run's `lock` file for its whole life (the
descriptor is inherited by the driver). A daemon killed after the job started but before it stored
the handle therefore finds, on restart, either the pid file or a lock it cannot take, and re-attaches
instead of starting a second job (ADR 0030).

Admission: the machine paces only so many jobs at once (`max_concurrent_runs`, default
`default_max_concurrent_runs()`); the watcher keeps the rest queued. A small monitor thread per job
wakes the watcher the moment the job prints its result line and again when its process exits, so a
finished run is concluded at once, not at the watcher's next poll.

Warm start: every driver starts with the install's class archive when there is one
(`spark_class_archive`, built in the background when missing). With `standby_workers` set, the
launcher keeps a standby driver (`local_standby`) within the admission limit, and a run with that many
workers takes it instead of starting a JVM of its own. The run's pid file then names the standby's
process, and the standby's logs are hard-linked as the run's, so watching, cancelling, re-attaching
and failure reasons work the same for both.

Secrets: the spec carries the Kafka SASL password, so the run directory is 0700, the spec, pid and
logs are created 0600, and `release` deletes the spec once the run has ended (the job reads it only at
start-up; re-attaching needs only the pid file and the logs). The job inherits only the variables named
in `JOB_ENV_NAMES` / `JOB_ENV_PREFIXES`, never the daemon's REPLAY_* settings (tokens, database URL).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path

import structlog

import spark_job
from daemon.adapters.local_standby import (
    SCRATCH,
    Standby,
    StandbyDrivers,
    process_start_ticks,
    scratch_environment,
)
from daemon.adapters.spark_class_archive import DRIVER_JAVA_OPTIONS, ClassArchive
from daemon.core.errors import Unavailable
from daemon.core.retry import Clock, Sleep, poll
from daemon.usecases.ports import (
    FAILED_PREFIX,
    RESULT_PREFIX,
    Handle,
    JobOutcome,
    JobState,
    Launcher,
    parse_outcome,
)
from spark_job.formats import session_conf_for_jars
from spark_job.main import PACKAGE_DIR_CONF, archive_name

log = structlog.get_logger(__name__)

JOB_ENTRY = Path(spark_job.__file__).parent / "main.py"


CORES_PER_JOB = 2  # the default `local_workers`: two task threads publish, each with its producer
MEMORY_PER_JOB = 2 * 1024**3  # Spark's default 1 GiB driver heap + the Python workers and JVM overhead
MONITOR_EVERY_S = 0.1
PID_FILE_WAIT_S = 10.0  # a job holding its lock writes its pid file within milliseconds of starting
# Run by the job's own process before it becomes `spark-submit` (exec keeps the pid and start time):
# "<pid> <start ticks>" into the pid file ($0), created 0600, renamed into place whole.
RECORD_PID_THEN_EXEC = (
    'umask 077 && printf "%s %s\\n" "$$" "$(cut -d" " -f22 /proc/$$/stat)" > "$0.tmp"'
    ' && mv -f "$0.tmp" "$0" && exec "$@"'
)
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600

PRUNE_EVERY_S = 3600.0  # how often released runs' old folders are looked for
RELEASED = "released"  # written in a run's folder by `release`: only such folders are ever pruned
# What the job's processes may inherit from the daemon: what the JVM, Spark, Python and the job's own
# AWS clients (S3, KMS for encrypted PII columns) read, and how they reach the network.
JOB_ENV_NAMES = frozenset(
    {
        *("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR"),
        *("JAVA_HOME", "JAVA_TOOL_OPTIONS", "HADOOP_HOME", "HADOOP_CONF_DIR", "YARN_CONF_DIR"),
        *("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"),
        *("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"),
    }
)
JOB_ENV_PREFIXES = ("LC_", "SPARK_", "PYSPARK_", "PYTHON", "AWS_")


def job_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The job's environment: the allowed part of `environ`, driver and executors on this interpreter
    (whose environment has the job's dependencies). Nothing else: the daemon's tokens stay with it."""
    kept = {
        name: value
        for name, value in environ.items()
        if name in JOB_ENV_NAMES or name.startswith(JOB_ENV_PREFIXES)
    }
    return {**kept, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


def _last_written(directory: Path) -> float:
    """When anything in a run's folder was last written (epoch seconds)."""
    return max(path.stat().st_mtime for path in (directory, *directory.iterdir()))


def _locked(lock_path: Path) -> bool:
    """Whether a job holds the run's lock (a folder without one has no job to hold it)."""
    try:
        descriptor = os.open(lock_path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)  # and the lock with it
    return False


def _private_file(path: Path, flags: int) -> int:
    """A descriptor of `path` opened with `flags`, created 0600 (never widened, never chmod-ed after)."""
    return os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)


def _write_private(path: Path, text: str) -> None:
    """Write `text` to a new 0600 file at `path`; an older file there is removed first, so the mode is
    always the one given at creation."""
    path.unlink(missing_ok=True)
    with os.fdopen(_private_file(path, os.O_WRONLY | os.O_EXCL), "w", encoding="utf-8") as out:
        out.write(text)


def _private_dir(path: Path) -> None:
    """`path` as a directory only its owner can enter (a run directory of an older daemon is narrowed
    before anything is written into it)."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o777 != PRIVATE_DIR:
        path.chmod(PRIVATE_DIR)


def default_max_concurrent_runs(cores: int | None = None, memory_bytes: int | None = None) -> int:
    """Jobs this machine can pace at once: one per 2 cores and 2 GiB, at least one.

    A paced job needs its cores to itself: three 3,000/s jobs on 2 cores swung 53-60% (per-second p95)
    around their rate, one at a time holds it. Memory bounds it on a many-core, small-memory host.
    """
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if memory_bytes is None:
        memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min(cores // CORES_PER_JOB, memory_bytes // MEMORY_PER_JOB))


def _watch_job(
    stdout: Path, alive: Callable[[], bool], wake: Callable[[], None], *, clock: Clock, sleep: Sleep
) -> None:
    """Wake the watcher once the job printed its result line, and once its process is gone."""
    markers = (RESULT_PREFIX.encode(), FAILED_PREFIX.encode())
    offset, carry, said = 0, b"", False

    def gone() -> bool | None:
        nonlocal offset, carry, said
        running = alive()
        if not said:
            try:
                with stdout.open("rb") as out:
                    out.seek(offset)
                    chunk = out.read()
            except FileNotFoundError:
                chunk = b""
            offset += len(chunk)
            text, carry = carry + chunk, (carry + chunk)[-32:]
            if any(marker in text for marker in markers):
                said = True
                wake()
        if not running:
            wake()
            return True
        return None

    poll(gone, every_s=MONITOR_EVERY_S, timeout_s=None, clock=clock, sleep=sleep)


def default_spark_submit() -> str:
    """The `spark-submit` installed with pyspark beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "spark-submit"
    return str(beside) if beside.exists() else "spark-submit"


class LocalSparkLauncher(Launcher):
    kind = "local"

    def __init__(
        self,
        *,
        runs_dir: Path,
        spark_submit: str | None = None,
        task_retries: int = 2,
        extra_conf: dict[str, str] | None = None,
        max_concurrent_runs: int | None = None,
        jars: tuple[Path, ...] = (),
        standby_workers: int | None = None,
        standby_max_idle_s: float = 600.0,
        class_archive: ClassArchive | None = None,
        run_dirs_keep_s: float | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = time.sleep,
    ) -> None:
        """``run_dirs_keep_s``: how long a released run's folder (its logs, its result) stays after
        it was last written, and a job package zip after its last use; None keeps every one."""
        self._clock, self._sleep = clock, sleep
        self._runs_dir = runs_dir
        self._run_dirs_keep_s = run_dirs_keep_s
        self._next_prune_at = clock()
        self._spark_submit = spark_submit or default_spark_submit()
        self._task_retries = task_retries
        self._extra_conf = extra_conf or {}
        # Spark's scratch in each job's own folder, unless the operator said where it goes
        self._own_scratch = "SPARK_LOCAL_DIRS" not in os.environ and "spark.local.dir" not in self._extra_conf
        self._jars = jars
        self._class_archive = class_archive
        self.max_concurrent_runs = max_concurrent_runs or default_max_concurrent_runs()
        self._wake: Callable[[], None] | None = None
        self._monitored: set[str] = set()  # run ids with a monitor thread (jobs of a restarted daemon too)
        self._live_at_start: list[Handle] = []  # jobs an earlier daemon started, until they are followed
        self._clear_ended_jobs()
        self._prune_old_run_dirs()
        self._standbys = (
            StandbyDrivers(
                directory=runs_dir.parent / "standby",
                workers=standby_workers,
                command=self.standby_command,
                environment=lambda: job_environment(os.environ),
                scratch=self._scratch,
                room=self._room_for_standbys,
                max_idle_s=standby_max_idle_s,
                clock=clock,
            )
            if standby_workers is not None
            else None
        )

    def _clear_ended_jobs(self) -> None:
        """At start-up: a spec (or a Spark scratch) whose job has ended is never read again, yet stays
        when the daemon stopped between a run's end and its release (or when an older daemon, which
        kept specs, ran it)."""
        left = {path.parent for name in ("spec.json", SCRATCH) for path in self._glob_runs(f"*/{name}")}
        for directory in sorted(left):
            run_id = directory.name
            try:
                ended = not self._alive(self._recorded(run_id))
            except (OSError, ValueError):  # no pid file: not started (a submit retry rewrites it)
                continue
            if ended:
                self._clear_ended(run_id)
                log.info("ended job cleared", run_id=run_id, kept="pid file and logs")
            else:
                self._live_at_start.append(self._recorded(run_id))

    def _prune_old_run_dirs(self) -> None:
        """Remove the folders of released runs not written for `run_dirs_keep_s` (at start-up, then at
        most every `PRUNE_EVERY_S` as runs are released): nothing reads them once their run
        concluded, and a reconcile's result alone can be megabytes of ids. Only a folder `release`
        marked goes (a run that ended while no daemon ran still has its outcome to be read), and
        never one whose job is alive, whatever its age. Old job package zips go too."""
        if self._run_dirs_keep_s is None or self._clock() < self._next_prune_at:
            return
        self._next_prune_at = self._clock() + PRUNE_EVERY_S
        oldest = time.time() - self._run_dirs_keep_s
        removed = 0
        for directory in self._glob_runs("*/"):
            try:
                if not (directory / RELEASED).exists() or _last_written(directory) > oldest:
                    continue
                if _locked(directory / "lock") or self._job_alive(directory.name):
                    continue
            except OSError:  # removed meanwhile, or unreadable: not ours to judge
                continue
            shutil.rmtree(directory, ignore_errors=True)
            removed += 1
        if removed:
            log.info("old run folders removed", count=removed, older_than_days=self._run_dirs_keep_s / 86400)
        self._prune_old_packages(oldest)

    def _prune_old_packages(self, oldest: float) -> None:
        """Remove the job's zips (one per code version) not used since ``oldest`` (a job marks its
        zip when it starts), and a zip half-written by a job killed meanwhile once it is an hour old.

        A job's executors read its zip after the mark (at their first task; a standby's, once it is
        claimed), so the zip of the code this daemon launches is always kept, and none goes while a
        job an earlier daemon started, maybe of older code, is alive."""
        if not self.package_dir.is_dir() or any(self._alive(handle) for handle in self._live_at_start):
            return
        current = archive_name(JOB_ENTRY.parent)
        abandoned = time.time() - 3600
        removed = []
        for path in self.package_dir.glob("spark_job-*"):
            if path.name == current:
                continue
            try:
                written = path.stat().st_mtime
            except OSError:  # removed meanwhile
                continue
            if written < (abandoned if path.suffix == ".tmp" else oldest):
                path.unlink(missing_ok=True)
                removed.append(path.name)
        if removed:
            log.info("old job packages removed", names=sorted(removed))

    def _scratch(self, directory: Path) -> dict[str, str]:
        return scratch_environment(directory) if self._own_scratch else {}

    def _job_alive(self, run_id: str) -> bool:
        """Whether the job the run's pid file names is alive (a standby's holds no run lock)."""
        try:
            return self._alive(self._recorded(run_id))
        except (OSError, ValueError):  # no pid file: no job was started
            return False

    def _glob_runs(self, pattern: str) -> list[Path]:
        return list(self._runs_dir.glob(pattern)) if self._runs_dir.is_dir() else []

    def _clear_ended(self, run_id: str) -> None:
        """What a run's ended job leaves that no one reads: its spec and its Spark scratch."""
        directory = self.run_dir(run_id)
        (directory / "spec.json").unlink(missing_ok=True)
        shutil.rmtree(directory / SCRATCH, ignore_errors=True)

    def _room_for_standbys(self) -> int:
        """The admission limit less the jobs alive now (followed ones, and an earlier daemon's)."""
        earlier = {h["run_id"] for h in self._live_at_start if self._alive(h)} - self._monitored
        return (self.max_concurrent_runs or 1) - len(self._monitored) - len(earlier)

    def _recorded(self, run_id: str) -> Handle:
        """The handle of the job the run's pid file names (`OSError`, `ValueError`: none recorded)."""
        fields = (self.run_dir(run_id) / "pid").read_text().split()
        if not fields:
            raise ValueError(f"the pid file of run {run_id} is empty")
        ticks = int(fields[1]) if len(fields) > 1 and fields[1] != "None" else None
        return self._handle(run_id, int(fields[0]), ticks)

    def _reattach(self, run_id: str) -> Handle:
        handle = self._recorded(run_id)
        self._monitor(handle)
        log.info("job re-attached", run_id=run_id, pid=handle["pid"])
        return handle

    def _reattach_starting(self, run_id: str) -> Handle:
        """A live job holds the run's lock but its pid file is not there yet: it is starting (a daemon
        died between starting it and storing its handle). Wait for its pid file, never start another."""
        pid_file = self.run_dir(run_id) / "pid"
        poll(
            lambda: True if pid_file.exists() else None,
            every_s=0.05,
            timeout_s=PID_FILE_WAIT_S,
            clock=self._clock,
            sleep=self._sleep,
        )
        if not pid_file.exists():
            raise Unavailable(f"a job of run {run_id} holds its lock but wrote no pid file yet")
        return self._reattach(run_id)

    def notify_on_change(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def warm(self, workers: int) -> bool | None:
        return None if self._standbys is None else self._standbys.ready_for(workers)

    def keep_warm(self, busy: Callable[[], bool]) -> None:
        """The class archive built when it is missing (once per install), and the standbys kept."""
        if self._class_archive is not None:
            _private_dir(self._runs_dir.parent)
            self._class_archive.start_builder(
                job_environment(os.environ), self._runs_dir.parent / "class-archive.log"
            )
        if self._standbys is not None:
            self._standbys.start(busy)

    def close(self) -> None:
        """Stop the idle standbys (a run's driver, claimed, goes on)."""
        if self._standbys is not None:
            self._standbys.close()

    def standby_command(self, directory: Path, owner: str, max_wait_s: float) -> list[str]:
        """A standby's `spark-submit`: the run's command with the session settings of every table
        format whose runtime its jars hold (its session starts before any run names a format), and
        the standby's arguments for a spec."""
        assert self._standbys is not None
        command = self.submit_command(directory.name, directory, workers=self._standbys.workers)
        formats = session_conf_for_jars(jar.name for jar in self._jars)
        settings = [arg for key, value in formats.items() for arg in ("--conf", f"{key}={value}")]
        entry = command.index(str(JOB_ENTRY))
        return [
            *command[:entry],
            *settings,
            str(JOB_ENTRY),
            "--standby",
            str(directory),
            owner,
            f"{max_wait_s:.0f}",
        ]

    def _monitor(self, handle: Handle, process: subprocess.Popen[bytes] | None = None) -> None:
        """Follow the job in a daemon thread (our own child by `poll`, a re-attached one by its pid)."""
        wake = self._wake
        if wake is None or handle["run_id"] in self._monitored:
            return
        self._monitored.add(handle["run_id"])

        def alive() -> bool:
            return process.poll() is None if process is not None else self._alive(handle)

        def follow() -> None:
            try:
                _watch_job(Path(handle["stdout"]), alive, wake, clock=self._clock, sleep=self._sleep)
            finally:
                self._monitored.discard(handle["run_id"])

        threading.Thread(target=follow, name=f"job-monitor-{handle['run_id']}", daemon=True).start()

    def run_dir(self, run_id: str) -> Path:
        return self._runs_dir / run_id

    def result_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / "result.json"

    def submit(
        self, run_id: str, spec_json: str, *, workers: int, application_id: str | None = None
    ) -> Handle:
        del application_id  # never given: a local job has no application (`pipeline_application`)
        directory = self.run_dir(run_id)
        pid_file = directory / "pid"
        if pid_file.exists():  # submitted before a restart: re-attach, never start twice
            return self._reattach(run_id)
        _private_dir(self._runs_dir)
        _private_dir(directory)
        lock = _private_file(directory / "lock", os.O_RDWR)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # its job is alive, started by a daemon that died right after
                return self._reattach_starting(run_id)
            if pid_file.exists():  # a job wrote it and ended between our two looks
                return self._reattach(run_id)
            taken = self._start_on_standby(run_id, spec_json, workers=workers)
            if taken is not None:  # warm: it was ready; else still starting, so barely warmer than cold
                warm, ready = taken
                log.info("job started on a standby driver", run_id=run_id, pid=warm.pid, ready=ready)
                handle = {**self._handle(run_id, warm.pid, warm.ticks), "standby": True, "warm": ready}
                self._monitor(handle, warm.process)
                return handle
            process = self._start(run_id, spec_json, workers=workers, lock=lock)
        finally:
            os.close(lock)  # the job keeps the lock through its own copy of the descriptor
        poll(  # its first act: then the pid file is there whenever a handle of ours is
            lambda: True if pid_file.exists() or process.poll() is not None else None,
            every_s=0.01,
            timeout_s=PID_FILE_WAIT_S,
            clock=self._clock,
            sleep=self._sleep,
        )
        log.info("job started", run_id=run_id, pid=process.pid, workers=workers)
        handle = self._handle(run_id, process.pid, process_start_ticks(process.pid))
        self._monitor(handle, process)
        return handle

    def _start_on_standby(self, run_id: str, spec_json: str, *, workers: int) -> tuple[Standby, bool] | None:
        """Hand the run to a standby: its spec, logs (hard links) and pid file first, the claim last, so
        a restarted daemon finds the pid file of any standby that may have the run; the standby and
        whether it was ready. None: start cold."""
        standby = self._standbys.take(workers) if self._standbys is not None else None
        if standby is None:
            return None
        directory = self.run_dir(run_id)
        spec_path = directory / "spec.json"
        logs = [directory / name for name in ("stdout.log", "stderr.log")]
        if any(path.exists() for path in logs):  # an earlier attempt's logs: keep them, start cold
            standby.stop()
            return None
        _write_private(spec_path, spec_json)
        try:
            for path in logs:
                os.link(standby.directory / path.name, path)
            pending = directory / "pid.tmp"
            _write_private(pending, f"{standby.pid} {standby.ticks}\n")
            pending.rename(directory / "pid")
            ready = standby.ready()
            if self._standbys is not None and self._standbys.claim(standby, spec_path):
                return standby, ready
        except FileNotFoundError:  # its directory was renamed away: it gave up a moment ago
            pass
        for path in (directory / "pid", *logs):  # it expired a moment ago: as if never offered
            path.unlink(missing_ok=True)
        standby.stop()
        return None

    @property
    def package_dir(self) -> Path:
        """Where jobs keep the zip of their package they ship to executors, one per code version."""
        return self._runs_dir.parent / "job-packages"

    def submit_command(self, run_id: str, spec_path: Path, *, workers: int) -> list[str]:
        """The `spark-submit` of one run's job: `workers` slots, no speculation, the configured jars."""
        options = self._class_archive.java_options() if self._class_archive else DRIVER_JAVA_OPTIONS
        conf = {
            "spark.driver.extraJavaOptions": options,
            PACKAGE_DIR_CONF: str(self.package_dir),
            **self._extra_conf,
        }
        jars = ["--jars", ",".join(str(jar) for jar in self._jars)] if self._jars else []
        return [
            self._spark_submit,
            "--master",
            f"local[{workers},{self._task_retries}]",
            "--name",
            f"replay-{run_id}",
            "--conf",
            "spark.speculation=false",
            "--conf",
            "spark.ui.enabled=false",
            *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")],
            *jars,
            str(JOB_ENTRY),
            str(spec_path),
        ]

    def _start(self, run_id: str, spec_json: str, *, workers: int, lock: int) -> subprocess.Popen[bytes]:
        """Start the job, holding `lock` (inherited), its first act writing the run's pid file."""
        if shutil.which(self._spark_submit) is None:
            raise FileNotFoundError(f"spark-submit not found: {self._spark_submit}")
        directory = self.run_dir(run_id)
        spec_path = directory / "spec.json"
        _write_private(spec_path, spec_json)
        command = [
            "/bin/sh",
            "-c",
            RECORD_PID_THEN_EXEC,
            str(directory / "pid"),
            *self.submit_command(run_id, spec_path, workers=workers),
        ]
        appending = os.O_WRONLY | os.O_APPEND
        with (
            os.fdopen(_private_file(directory / "stdout.log", appending), "ab") as out,
            os.fdopen(_private_file(directory / "stderr.log", appending), "ab") as err,
        ):
            try:
                return subprocess.Popen(
                    command,
                    stdout=out,
                    stderr=err,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    pass_fds=(lock,),
                    env={**job_environment(os.environ), **self._scratch(directory)},
                )
            except OSError:  # e.g. no /bin/sh: the run fails to launch and is never released
                spec_path.unlink(missing_ok=True)
                raise

    def _handle(self, run_id: str, pid: int, start_ticks: int | None) -> Handle:
        directory = self.run_dir(run_id)
        return {
            "kind": self.kind,
            "run_id": run_id,
            "pid": pid,
            "start_ticks": start_ticks,
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
        ticks = process_start_ticks(pid)
        return ticks is not None and (handle.get("start_ticks") in (None, ticks))

    def state(self, handle: Handle) -> JobState:
        if self._alive(handle):
            self._monitor(handle)  # a job this daemon did not start (it restarted): follow it too
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
        poll(
            lambda: True if not self._alive(handle) else None,
            every_s=0.2,
            timeout_s=grace_s,
            clock=self._clock,
            sleep=self._sleep,
        )
        if self._alive(handle):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        log.info("job cancelled", run_id=handle.get("run_id"), pid=pid)

    def release(self, handle: Handle) -> bool:
        """The run has ended: delete its spec (the Kafka password in it), and its Spark scratch once its
        job is gone (a job killed before its JVM cleaned up leaves its shuffle there; one still alive
        keeps it, and the next start-up clears it). The pid file and the logs stay, for `state`,
        `outcome` and `log_tail` of a concluded run, until the folder is older than
        `run_dirs_keep_s` (then it may go: it is marked released)."""
        run_id = handle.get("run_id")
        if run_id:
            (self.run_dir(run_id) / "spec.json").unlink(missing_ok=True)
            log.info("job spec deleted", run_id=run_id)
            with contextlib.suppress(FileNotFoundError):  # no folder: nothing was ever started
                (self.run_dir(run_id) / RELEASED).touch()
            if not self._alive(handle):
                shutil.rmtree(self.run_dir(run_id) / SCRATCH, ignore_errors=True)
        self._prune_old_run_dirs()
        return True
