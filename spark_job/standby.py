"""A standby driver: ``spark-submit ... main.py --standby DIR`` gets past the JVM, the imports and the
SparkSession before any run exists, then waits for exactly one claim and runs it (ADR 0049).

The directory is the standby's whole conversation with its launcher:
- ``ready`` appears (written whole) once the session and the Python workers are warm;
- ``claim`` is written by the launcher (renamed into place whole): one JSON document,
  ``{"spec": <path or URI>, "claimed_at": <epoch seconds>}``. The standby runs that one spec,
  prints its final line as any job does, stops its session and exits: one run per process, so a run
  still has its driver to itself.

A standby never outlives the daemon that started it unless it holds a run: it exits when the
``owner`` process (pid and start time) is gone, or after ``max_wait_s`` without a claim. Giving up is
made safe against a claim landing at the same moment: the standby renames its directory away first
(a later claim then fails to land and the launcher starts the run cold), then looks for a claim once
more and runs it if one got in before the rename.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

log = logging.getLogger("spark_job")

CLAIM = "claim"
READY = "ready"
EXPIRED_SUFFIX = ".expired"
WAIT_EVERY_S = 0.02  # a claim is taken within this much of landing


@dataclass(frozen=True)
class Claim:
    spec_uri: str
    claimed_at: float


@dataclass(frozen=True)
class Owner:
    """The process a standby waits for: gone (or a recycled pid), the standby has no one to serve."""

    pid: int
    start_ticks: int

    def alive(self) -> bool:
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return int(stat[stat.rindex(")") + 2 :].split()[19]) == self.start_ticks


def read_claim(directory: Path) -> Claim | None:
    try:
        document = json.loads((directory / CLAIM).read_text())
    except FileNotFoundError:
        return None
    return Claim(spec_uri=str(document["spec"]), claimed_at=float(document["claimed_at"]))


def warm(spark: SparkSession, directory: Path) -> None:
    """Take a tiny table through the paths a run takes first, so its first query finds them compiled
    and loaded: a Parquet scan, the counting pass's hash buckets, the shuffle and the per-partition
    sort, and the Arrow hand-over to the Python workers, which import what a run's tasks import.
    Workers are reused (``spark.python.worker.reuse``): the run's first tasks find them ready."""
    import pyarrow as pa
    from pyspark.sql import functions as sf

    from spark_job.arrow_map import map_in_arrow

    slots = spark.sparkContext.defaultParallelism
    table = str(directory / "warm-up.parquet")
    rows = spark.range(0, 2_000, 1, slots).select(
        sf.col("id").cast("string").alias("key"), (sf.col("id") % 7).alias("day")
    )
    rows.write.mode("overwrite").partitionBy("day").parquet(table)
    read = spark.read.parquet(table).where(sf.col("day") < 5)
    read.groupBy(sf.pmod(sf.hash("key"), sf.lit(slots)).alias("bucket")).count().collect()

    def imports(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import confluent_kafka  # noqa: F401

        import spark_job.publish  # noqa: F401

        yield pa.RecordBatch.from_pydict({"rows": [sum(batch.num_rows for batch in batches)]})

    spread = read.repartition(slots, "key").sortWithinPartitions("day", "key")
    map_in_arrow(spread, imports, "rows long").collect()


def wait_for_claim(directory: Path, owner: Owner | None, *, max_wait_s: float) -> tuple[Path, Claim] | None:
    """The claim that lands in ``directory`` (and the directory, renamed if it expired), or None when
    the owner went away or nothing came within ``max_wait_s``."""
    started = time.monotonic()
    while True:
        claim = read_claim(directory)
        if claim is not None:
            return directory, claim
        if owner is not None and not owner.alive():
            why = "its daemon is gone"
            break
        if time.monotonic() - started > max_wait_s:
            why = f"no run claimed it within {max_wait_s:.0f} s"
            break
        time.sleep(WAIT_EVERY_S)
    expired = directory.with_name(directory.name + EXPIRED_SUFFIX)
    directory.rename(expired)  # from here no claim can land
    claim = read_claim(expired)
    if claim is not None:  # it landed between the last look and the rename: it is ours to run
        return expired, claim
    log.info("standby exits: %s", why)
    return None


def serve(directory: Path, session: SparkSession, owner: Owner | None, *, max_wait_s: float) -> Claim | None:
    """Warm up, say ready, and wait: the claim to run, or None (the caller exits without a run)."""
    began = time.monotonic()
    warm(session, directory)
    ready = directory / READY
    ready.with_suffix(".tmp").write_text(f"{os.getpid()}\n")
    ready.with_suffix(".tmp").rename(ready)
    log.info("standby ready in %.3f s after its session", time.monotonic() - began)
    claimed = wait_for_claim(directory, owner, max_wait_s=max_wait_s)
    return None if claimed is None else claimed[1]
