"""The local driver JVM's options and its class-data archive: Spark's classes mapped, not parsed (ADR 0054).

A local job's driver loads thousands of classes before its first send, and the JVM parses and
verifies each of them again at every start. Java's class-data sharing maps them from an archive
instead: `-XX:ArchiveClassesAtExit` writes one when a JVM exits, `-XX:SharedArchiveFile` uses it. Here
one small job (`spark_job.warmup`) is run once per Spark install to write it, and every local driver
(runs, standbys) is started with it.

The archive belongs to one Spark install, one JVM and the driver's JVM options, so its name carries a
digest of those. One process builds it (a file lock), under a temporary name renamed into place when
whole. A JVM given an archive that is missing, stale or damaged starts without it (`-Xshare:auto`,
Java's default): nothing depends on it but the start-up time.

    python -m daemon.adapters.spark_class_archive   # build it now (`make test` and `make demo` do)
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog

import spark_job

log = structlog.get_logger(__name__)

# A local job's JVM mostly reads Parquet and hands Arrow batches to Python, and on a small machine its
# start-up dominates: the C1 compiler alone and the serial collector start it seconds sooner (a
# 900-row job, spark-submit to REPLAY_RESULT: 25-33 s with them, 35-58 s without, same loaded
# machine). A launcher's `extra_conf` may set `spark.driver.extraJavaOptions` instead; EMR keeps the
# JVM defaults.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
WARMUP = Path(spark_job.__file__).parent / "warmup.py"
WARMUP_DONE = "WARMUP_DONE"
BUILD_TIMEOUT_S = 600.0


def default_directory() -> Path:
    """Beside the jar caches: $XDG_CACHE_HOME/kafka-replay/spark-classes (~/.cache by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-replay" / "spark-classes"


def _spark_home(spark_submit: str) -> Path:
    """The Spark install `spark_submit` runs: pyspark's own folder when it is installed here."""
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.origin is not None:
        return Path(spec.origin).parent
    return Path(shutil.which(spark_submit) or spark_submit).resolve().parent.parent


def _jvm() -> tuple[str, int, int] | None:
    """The JVM a driver runs: its library (what a JDK update replaces; the `java` launcher often stays
    byte for byte the same), by path, size and modification time."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found:
        return None
    java = Path(found).resolve()
    library = java.parent.parent / "lib" / "server" / "libjvm.so"
    target = library if library.exists() else java
    stat = target.stat()
    return (str(target), stat.st_size, stat.st_mtime_ns)


def install_digest(jars: list[tuple[str, int, int]], java: tuple[str, int, int] | None, options: str) -> str:
    """What an archive is valid for: Spark's jars (paths, sizes, times), the JVM, the JVM options."""
    text = repr((sorted(jars), java, options))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ClassArchive:
    """One install's archive: where it is, and how to build and use it."""

    path: Path
    spark_submit: str

    @classmethod
    def for_install(cls, directory: Path, spark_submit: str) -> ClassArchive:
        home = _spark_home(spark_submit)
        # by path and modification time: the JVM checks the class path an archive was written with,
        # jars' times included, so a second checkout's Spark, or one installed again where an earlier
        # one was, byte for byte the same, still needs an archive of its own
        jars = [
            (str(jar), jar.stat().st_size, jar.stat().st_mtime_ns) for jar in (home / "jars").glob("*.jar")
        ]
        digest = install_digest(jars, _jvm(), DRIVER_JAVA_OPTIONS)
        return cls(path=directory / f"spark-classes-{digest}.jsa", spark_submit=spark_submit)

    def java_options(self) -> str:
        """The driver's JVM options, with the archive once it is there. Not before: a JVM told of an
        archive it cannot map starts without the JDK's own class archive too. Nor at a path with
        whitespace, which Spark would split into two options."""
        if not self.ready() or any(char.isspace() for char in str(self.path)):
            return DRIVER_JAVA_OPTIONS
        return f"{DRIVER_JAVA_OPTIONS} -XX:SharedArchiveFile={self.path}"

    def ready(self) -> bool:
        return self.path.is_file()

    def build(
        self, environment: Mapping[str, str], timeout_s: float = BUILD_TIMEOUT_S, *, wait: bool = False
    ) -> bool:
        """Run the warm-up job once with the archive written at its exit; True when the archive is there
        (built now or before), False when the build failed (logged: jobs then start without it, as
        before) or, unless `wait`, another process is building it. Holding the lock, it first clears
        what an interrupted build left."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with (self.path.parent / ".lock").open("w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log.info("class archive being built by another process", path=str(self.path))
                return False
            for stale in self.path.parent.glob("spark-classes-*.jsa.*.tmp"):  # builds interrupted earlier
                stale.unlink(missing_ok=True)
            return self.ready() or self._build_locked(environment, timeout_s)

    def _build_locked(self, environment: Mapping[str, str], timeout_s: float) -> bool:
        pending = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        command = [
            self.spark_submit,
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            f"spark.driver.extraJavaOptions={DRIVER_JAVA_OPTIONS} -XX:ArchiveClassesAtExit={pending}",
            str(WARMUP),
        ]
        started = time.monotonic()
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=timeout_s, env=dict(environment), check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            pending.unlink(missing_ok=True)
            log.warning("class archive not built", path=str(self.path), reason=str(exc))
            return False
        if done.returncode != 0 or WARMUP_DONE not in done.stdout or not pending.is_file():
            pending.unlink(missing_ok=True)
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            log.warning("class archive not built", path=str(self.path), exit=done.returncode, tail=tail)
            return False
        pending.rename(self.path)
        size_mb = round(self.path.stat().st_size / 2**20)
        seconds = round(time.monotonic() - started, 1)
        log.info("class archive built", path=str(self.path), size_mb=size_mb, s=seconds)
        return True

    def start_builder(self, environment: Mapping[str, str], log_path: Path) -> subprocess.Popen[bytes] | None:
        """Unless it is there: a detached process that builds it (this module's `main`), logging to
        `log_path`. Detached, so a daemon stopped or killed meanwhile leaves no half-built archive: the
        builder finishes, renames and exits by itself; None when there is nothing to build."""
        if self.ready():
            return None
        argv = [
            sys.executable,
            "-m",
            __name__,
            "--spark-submit",
            self.spark_submit,
            "--archive",
            str(self.path),
        ]
        with log_path.open("ab") as out:
            process = subprocess.Popen(
                [*argv, "--no-wait"],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=dict(environment),
            )
        threading.Thread(target=process.wait, name="class-archive-builder", daemon=True).start()  # no zombie
        log.info("class archive builder started", pid=process.pid, log=str(log_path))
        return process


def main(argv: list[str] | None = None) -> int:
    """Build this install's archive; 0 when it is there (or, with --no-wait, another process builds it)."""
    parser = argparse.ArgumentParser(description="Build the local drivers' JVM class-data archive.")
    beside = Path(sys.executable).with_name("spark-submit")
    parser.add_argument("--spark-submit", default=str(beside) if beside.exists() else "spark-submit")
    parser.add_argument(
        "--archive",
        type=Path,
        default=None,
        help="default: this install's, under " + str(default_directory()),
    )
    parser.add_argument("--no-wait", action="store_true", help="leave it to a build already running")
    args = parser.parse_args(argv)
    archive = (
        ClassArchive(args.archive, args.spark_submit)
        if args.archive
        else ClassArchive.for_install(default_directory(), args.spark_submit)
    )
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    built = archive.build(env, wait=not args.no_wait)
    print(f"class archive: {archive.path}" if built else "class archive: not built (see the log above)")
    return 0 if built or args.no_wait else 1


if __name__ == "__main__":
    sys.exit(main())
