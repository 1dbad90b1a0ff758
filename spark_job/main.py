"""Entry point: ``spark-submit [--master local[2,2]] spark_job/main.py SPEC_URI``.

``main.py --standby DIR OWNER MAX_WAIT_S`` starts a standby driver instead: session first, spec later
(``spark_job.standby``); the run it is given then goes exactly as below.

The same command runs locally and on EMR Serverless. It parses the spec, builds the SparkSession
(app ``replay-<run id>``, no speculation: a speculative copy would publish a partition twice), runs
the job (a replay, or with ``mode: "reconcile"`` only the reconcile of an earlier run) and prints
exactly one final line, ``REPLAY_RESULT {json}`` or ``REPLAY_FAILED {json}`` (then exits 1); see
``spark_job.result`` for both shapes. A failure is labelled "nothing sent" (confirmed 0) only when
it happened before publishing started.

The package need not be installed: run as a script, this file puts its parent directory on
``sys.path`` and ships the package to the executors with ``addPyFile``. On EMR Serverless pass the
package zipped instead (``--py-files spark_job.zip``, built by ``replay package``) next to
``main.py`` as the entry point. Either way executors get this package's modules and nothing else.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the package, not this directory's modules
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from typing import TYPE_CHECKING

from spark_job.errors import JobError, SpecError
from spark_job.formats import FORMAT_CONF
from spark_job.result import (
    JobFailed,
    Phase,
    ReconcileResult,
    ReplayFailure,
    ReplayResult,
    memory_hint,
    reason_of,
    report,
    utc_now,
)
from spark_job.spec.model import JobSpec
from spark_job.spec.parse import load_spec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("spark_job")

# Forced: correctness of the throttle and the counts depends on them.
REQUIRED_CONF = {
    "spark.speculation": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.locality.wait": "0s",  # start tasks in partition order at once; locality buys nothing here
}
# Defaults a launcher may override with --conf.
DEFAULT_CONF = {"spark.task.maxFailures": "3"}  # a retry re-publishes a partition: allow few


PACKAGE_DIR_CONF = "spark.replay.packageDir"  # the launchers set it: where the job zips itself for executors

# A standby's session: its format settings came with its spark-submit (spark_job.formats)
ANY_FORMAT = "any"


def configure(builder: SparkSession.Builder, table_format: str = "parquet") -> SparkSession.Builder:
    """Apply the job's Spark settings to a session builder (tests use the same settings), with what
    reading ``table_format`` needs (``ANY_FORMAT``: none here; its launcher passed them)."""
    from pyspark import SparkConf

    submitted = SparkConf()
    for key, value in DEFAULT_CONF.items():
        if not submitted.contains(key):
            builder = builder.config(key, value)
    for key, value in {**REQUIRED_CONF, **FORMAT_CONF.get(table_format, {})}.items():
        builder = builder.config(key, value)
    return builder


def package_modules(package: Path) -> list[Path]:
    """The package's ``.py`` files, sorted: what executors import (no caches, nothing outside it)."""
    return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.relative_to(package).parts)


def _ship_package(spark: SparkSession) -> None:
    """Give executors this package when it was imported from a plain directory (not installed).

    Where the package came from decides, not where this entry point sits: on EMR `main.py` is a plain
    file while the package arrives zipped with `--py-files`, which the executors already have.
    """
    import spark_job

    package = Path(spark_job.__file__).resolve().parent
    if not package.is_dir():
        return  # imported from a zip given with --py-files: executors have it already
    cache = spark.sparkContext.getConf().get(PACKAGE_DIR_CONF)  # given by the daemon's launcher
    spark.sparkContext.addPyFile(str(package_archive(package, Path(cache) if cache else _package_cache())))


def package_archive(package: Path, cache: Path) -> Path:
    """``package`` zipped once per content into the private folder ``cache``: the local jobs of one
    code version all ship the same file, and no job leaves one behind (a cancelled job, SIGTERMed,
    runs no exit hook). Written whole by a rename, so a job never ships another's half-written zip."""
    modules = _modules(package)  # the zip holds these very bytes: a deploy meanwhile cannot mix versions
    archive = cache / _archive_name(modules)
    try:
        os.utime(archive)  # its last use: the launcher removes the zips of versions long unused
        return archive
    except FileNotFoundError:
        pass
    except OSError:  # not ours to mark (a read-only cache): ship it if it is there
        if archive.is_file():
            return archive
        raise
    cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    pending = cache / f"{archive.name}.{os.getpid()}.tmp"
    with zipfile.ZipFile(pending, "w") as bundle:
        for name, body in modules:
            bundle.writestr(f"spark_job/{name}", body)
    pending.replace(archive)
    return archive


def archive_name(package: Path) -> str:
    """The name ``package_archive`` gives ``package``'s zip as it is now on disk."""
    return _archive_name(_modules(package))


def _modules(package: Path) -> list[tuple[str, bytes]]:
    return [
        (source.relative_to(package).as_posix(), source.read_bytes()) for source in package_modules(package)
    ]


def _archive_name(modules: list[tuple[str, bytes]]) -> str:
    digest = hashlib.sha256()
    for name, body in modules:
        digest.update(b"%d:%s%d:%s" % (len(name.encode()), name.encode(), len(body), body))
    return f"spark_job-{digest.hexdigest()[:16]}.zip"


def _package_cache() -> Path:
    """Submitted by hand (no launcher named a folder): $XDG_CACHE_HOME/kafka-replay/job-packages."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kafka-replay" / "job-packages"


def _session(name: str, table_format: str) -> SparkSession:
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    from spark_job.executors import check_master

    SparkContext._ensure_initialized()  # the JVM spark-submit started: its conf names the master
    check_master(SparkConf().get("spark.master", ""))
    builder = SparkSession.builder.appName(name)
    spark = configure(builder, table_format).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    _ship_package(spark)
    return spark


def _log_peak_heap(session: SparkSession) -> None:
    """Log the driver JVM's peak heap (the sum of its heap pools' peaks; in local mode the executors'
    too) as ``peak_heap_mb=N``: bench/e2e.py reports it beside the process tree's sampled RSS."""
    try:
        management = session.sparkContext._jvm.java.lang.management  # type: ignore[union-attr]  # py4j
        heap = management.MemoryType.HEAP
        pools = management.ManagementFactory.getMemoryPoolMXBeans()
        peak = sum(pool.getPeakUsage().getUsed() for pool in pools if pool.getType().equals(heap))
        log.info("peak_heap_mb=%.0f", peak / 2**20)
    except Exception as exc:  # a figure for the logs only: never fail a run over it
        log.info("peak heap unknown (%s)", exc)


def main(argv: list[str] | None = None, *, spark: SparkSession | None = None) -> int:
    """Run one replay; ``spark`` injects an existing session (tests), otherwise one is built."""
    logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(name)s %(message)s", force=True)
    log.setLevel(logging.INFO)  # ours only: py4j chatters at INFO, even after the final line
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--standby"]:
        return _standby(args[1:])
    return run(args, spark=spark, stop=spark is None)


def _standby(args: list[str]) -> int:
    """Build the session now and run the spec a launcher claims this process for later, if any."""
    from spark_job import standby

    if len(args) != 3:
        print("usage: main.py --standby DIR OWNER_PID:START_TICKS|- MAX_WAIT_S", file=sys.stderr)
        return 2
    directory, owner_text, max_wait = Path(args[0]), args[1], float(args[2])
    owner = None if owner_text == "-" else standby.Owner(*map(int, owner_text.split(":")))
    session = _session(f"replay-standby-{directory.name}", ANY_FORMAT)
    claim = standby.serve(directory, session, owner, max_wait_s=max_wait)
    if claim is None:
        session.stop()
        return 0
    return run([claim.spec_uri], spark=session, stop=True, origin=claim.claimed_at)


def run(
    args: list[str], *, spark: SparkSession | None = None, stop: bool = True, origin: float | None = None
) -> int:
    """One run's spec: run it on ``spark`` (else a session built for it), print the final line.
    ``origin``: when the run was handed over (a standby's claim), else the spark-submit's start."""
    started_at = utc_now()
    spec: JobSpec | None = None
    phase = Phase() if origin is None else Phase(origin=origin)
    try:
        if len(args) != 1:
            raise SpecError("<argv>", "usage: main.py SPEC_URI (a path, file:// or s3:// URI)")
        spec = load_spec(args[0])
        from spark_job.job import run_reconcile, run_replay

        phase.mark("start")  # from spark-submit (or the claim) to the driver's Python, then the spec
        session = spark or _session(f"replay-{spec.run_id}", spec.source.format)
        phase.mark("session")
        try:
            if spec.mode == "reconcile":
                result: ReplayResult | ReconcileResult = run_reconcile(session, spec)
            else:
                result = run_replay(session, spec, phase)
        finally:
            _log_peak_heap(session)
            if stop:
                session.stop()  # before the final line, so nothing Spark prints can follow it
            phase.mark("stop")
    except JobFailed as failed:
        outcome = failed.failure
    except Exception as exc:
        if not isinstance(exc, JobError):
            log.exception("replay failed")
        nothing_sent = 0 if not phase.publishing else None  # once publishing started: unknown, never 0
        outcome = ReplayFailure(
            run_id=spec.run_id if spec else None,
            reason=memory_hint(exc),
            confirmed=nothing_sent,
            started_at=started_at,
            ended_at=utc_now(),
            on_topic_at_least=nothing_sent,
            dead_lettered=nothing_sent,
        )
    else:
        try:
            print(report(result, spec.result_uri), flush=True)
            return 0
        except Exception as exc:
            outcome = _unreported(
                result, spec, f"cannot write the result to {spec.result_uri}: {reason_of(exc)}"
            )
            outcome = replace(outcome, started_at=started_at)
    print(report(outcome, spec.result_uri if spec else None), flush=True)
    return 1


def _unreported(result: ReplayResult | ReconcileResult, spec: JobSpec, why: str) -> ReplayFailure:
    """The run's own counts, when only its result could not be written."""
    if isinstance(result, ReconcileResult):
        return ReplayFailure(
            run_id=spec.run_id,
            reason=f"reconciled, but {why}",
            confirmed=0,  # a reconcile publishes nothing
            ended_at=utc_now(),
            on_topic_at_least=0,
            dead_lettered=0,
        )
    return ReplayFailure(
        run_id=spec.run_id,
        reason=f"published, but {why}",
        confirmed=result.confirmed,
        failed_tasks=result.failed_tasks,
        duplicates_possible=result.duplicates_possible,
        ended_at=utc_now(),
        on_topic_at_least=result.confirmed,
        dead_lettered=result.dead_lettered,
        offsets=result.offsets,
    )


if __name__ == "__main__":
    raise SystemExit(main())
