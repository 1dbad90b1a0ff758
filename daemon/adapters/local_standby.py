"""Standby drivers for the local launcher: `spark-submit … main.py --standby DIR` processes already past
their JVM, imports and SparkSession, one of which the next run takes (ADR 0049).

Still one job per capacity: standbys and this launcher's running jobs together never exceed the
admission limit (`room`), none starts while every slot is held across the daemons sharing the store
(`busy`: a spare's start-up takes cores a job at the cap is paced on), a standby serves exactly one
run and exits with it, and the keeper starts the next one as soon as there is room. A standby that
waited longer than `max_idle_s` is recycled (its JVM has grown stale, its code may be older than the
daemon's); one that died is replaced, after a pause that doubles while standbys keep dying before
they are ready (a broken Spark install must not spin).

The conversation with a standby is its directory (`spark_job.standby`): it writes `ready`, the
launcher renames `claim` into place. A standby exits by itself when the daemon that started it is gone,
so a daemon never leaves idle JVMs behind, even when killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from daemon.core.retry import Clock

log = structlog.get_logger(__name__)

CLAIM = "claim"  # spark_job.standby's names: the two sides speak through these files
READY = "ready"
PID = "pid"
EXPIRED_SUFFIX = ".expired"
SCRATCH = "scratch"  # a job's Spark scratch (SPARK_LOCAL_DIRS) inside its own folder, removed with it
KEEP_EVERY_S = 0.5
SELF_EXPIRY_GRACE_S = 60.0  # a standby gives up this long after the keeper would have recycled it
FIRST_PAUSE_S = 5.0  # after a standby died before it was ready; doubles up to MAX_PAUSE_S
MAX_PAUSE_S = 300.0
KILL_GRACE_S = 5.0
FAILED_ROUND_PAUSE_S = 10.0  # e.g. the store is unreachable: try again, without a log line per round


def scratch_environment(directory: Path) -> dict[str, str]:
    """Where a job's Spark writes its shuffle blocks and its copies of added files: in the job's own
    folder, not /tmp, so a job killed before its JVM could clean up leaves nothing that outlives the
    folder (Spark creates it)."""
    return {"SPARK_LOCAL_DIRS": str(directory / SCRATCH)}


def process_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks: with the pid, it names one process, never a recycled pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[19])


@dataclass
class Standby:
    directory: Path
    process: subprocess.Popen[bytes]
    ticks: int | None
    born: float  # the keeper's clock

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def ready(self) -> bool:
        return (self.directory / READY).exists()

    def stop(self) -> None:
        """SIGTERM its process group, SIGKILL after a grace; its directory goes with it."""
        for sig, wait_s in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=wait_s)
                break
        self.remove()

    def remove(self) -> None:
        """Its directory, under either name (`.expired` once it gave up)."""
        for path in (self.directory, self.directory.with_name(self.directory.name + EXPIRED_SUFFIX)):
            shutil.rmtree(path, ignore_errors=True)


@dataclass
class StandbyDrivers:
    """The launcher's warm spares, kept by a thread between `start` and `close`."""

    directory: Path
    workers: int
    command: Callable[[Path, str, float], list[str]]  # (standby dir, owner, max wait) -> argv
    environment: Callable[[], Mapping[str, str]]
    room: Callable[[], int]  # standbys there may be now: the admission limit less the running jobs
    busy: Callable[[], bool] = lambda: False  # every slot held across daemons: start nothing now
    scratch: Callable[[Path], Mapping[str, str]] = scratch_environment  # a standby's, in its folder
    max_idle_s: float = 600.0
    clock: Clock = time.monotonic
    _standbys: list[Standby] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _pause_s: float = 0.0
    _not_before: float = 0.0

    def start(self, busy: Callable[[], bool] | None = None) -> None:
        """Clear what an earlier daemon left, then keep the spares in a daemon thread; ``busy`` says
        when every launcher slot is held (by any daemon on the store), when no spare may start."""
        if self._thread is not None:
            return
        if busy is not None:
            self.busy = busy
        self._clear_leftovers()
        self._thread = threading.Thread(target=self._keep, name="standby-keeper", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=KEEP_EVERY_S * 4)
        with self._lock:
            standbys, self._standbys = self._standbys, []
        for standby in standbys:
            standby.stop()

    def _keep(self) -> None:
        while not self._stop.is_set():
            pause_s = KEEP_EVERY_S
            try:
                self.keep()
            except Exception:  # never let the keeper die: runs still start cold without it
                log.exception("standby keeper failed a round")
                pause_s = FAILED_ROUND_PAUSE_S
            self._stop.wait(pause_s)

    def keep(self) -> None:
        """One round: drop the dead, recycle the stale, trim to the room there is, start what fits."""
        now = self.clock()
        with self._lock:
            for standby in list(self._standbys):
                if not standby.alive():
                    self._standbys.remove(standby)
                    self._died(standby, now)
                elif now - standby.born > self.max_idle_s:
                    self._standbys.remove(standby)
                    standby.stop()
                    log.info("standby driver recycled", pid=standby.pid, idle_s=round(now - standby.born))
            self._sweep_handed_over()
            room = max(0, self.room())
            while len(self._standbys) > room:  # a cold run took the room: the youngest spare gives it back
                extra = self._standbys.pop()
                extra.stop()
                log.info("standby driver stopped", pid=extra.pid, reason="a job needs its capacity")
            wanted = len(self._standbys) < room and now >= self._not_before and not self._stop.is_set()
            if wanted and not self.busy():  # a spare's start-up takes cores: never beside a job at the cap
                self._standbys.append(self._spawn(now))

    def _sweep_handed_over(self) -> None:
        """Remove the directories of standbys that took a run and have ended (the run keeps its logs:
        they are hard links in its own directory)."""
        kept = {standby.directory for standby in self._standbys}
        for directory in self.directory.glob("s-*") if self.directory.is_dir() else ():
            if directory in kept or not (directory / CLAIM).exists():
                continue
            try:
                pid, ticks = (directory / PID).read_text().split()[:2]
            except (OSError, ValueError):
                continue
            if ticks == "None" or process_start_ticks(int(pid)) != int(ticks):
                shutil.rmtree(directory, ignore_errors=True)

    def _died(self, standby: Standby, now: float) -> None:
        """Forget a standby whose process is gone; pause before the next if it never got ready."""
        was_ready = standby.ready()
        standby.remove()
        self._pause_s = 0.0 if was_ready else min(MAX_PAUSE_S, max(FIRST_PAUSE_S, 2 * self._pause_s))
        self._not_before = now + self._pause_s
        log.warning("standby driver died", pid=standby.pid, ready=was_ready, pause_s=self._pause_s)

    def _spawn(self, now: float) -> Standby:
        directory = self.directory / f"s-{uuid.uuid4().hex[:12]}"
        directory.mkdir(mode=0o700, parents=True)
        owner = f"{os.getpid()}:{process_start_ticks(os.getpid())}"
        argv = self.command(directory, owner, self.max_idle_s + SELF_EXPIRY_GRACE_S)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        with (
            os.fdopen(os.open(directory / "stdout.log", flags, 0o600), "wb") as out,
            os.fdopen(os.open(directory / "stderr.log", flags, 0o600), "wb") as err,
        ):
            process = subprocess.Popen(
                argv,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**self.environment(), **self.scratch(directory)},
            )
        ticks = process_start_ticks(process.pid)
        (directory / PID).write_text(f"{process.pid} {ticks}\n")
        log.info("standby driver started", pid=process.pid, workers=self.workers)
        return Standby(directory, process, ticks, born=now)

    def take(self, workers: int) -> Standby | None:
        """A live spare for a run of `workers` slots (ready or still starting: either beats a cold
        start), now the caller's to claim; None when there is none."""
        with self._lock:
            if workers != self.workers:
                return None
            for standby in self._standbys:
                if standby.alive():
                    self._standbys.remove(standby)
                    return standby
        return None

    def ready_for(self, workers: int) -> bool:
        """A live spare said ready, for a run of `workers` slots."""
        with self._lock:
            return workers == self.workers and any(s.alive() and s.ready() for s in self._standbys)

    @staticmethod
    def claim(standby: Standby, spec_path: Path) -> bool:
        """Hand `spec_path` to `standby`; False when it expired first (then start the run cold)."""
        document = json.dumps({"spec": str(spec_path), "claimed_at": time.time()})
        pending = standby.directory / f"{CLAIM}.tmp"
        try:
            pending.write_text(document)
            pending.rename(standby.directory / CLAIM)
        except FileNotFoundError:  # it renamed its directory away: it will not run anything now
            return False
        return True

    def count(self) -> int:
        with self._lock:
            return len(self._standbys)

    def _clear_leftovers(self) -> None:
        """Standbys of an earlier daemon that hold no claim are stopped; one with a claim is a run's
        driver now and is left alone."""
        if not self.directory.is_dir():
            return
        for directory in self.directory.iterdir():
            if not directory.is_dir():
                continue
            try:
                pid, ticks = (directory / PID).read_text().split()[:2]
            except (OSError, ValueError):
                shutil.rmtree(directory, ignore_errors=True)
                continue
            alive = ticks != "None" and process_start_ticks(int(pid)) == int(ticks)
            if alive and (directory / CLAIM).exists():
                continue
            if alive:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(int(pid), signal.SIGKILL)
                log.info("standby driver of an earlier daemon stopped", pid=int(pid))
            shutil.rmtree(directory, ignore_errors=True)
