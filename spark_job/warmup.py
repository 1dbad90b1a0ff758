"""A small local job whose loaded classes become the driver JVM's class-data archive (ADR 0054).

`daemon.adapters.spark_class_archive` runs this once per Spark install under
`-XX:ArchiveClassesAtExit`. It does in miniature what a replay's driver does (a session configured as
the job's, a day-partitioned Parquet read, a hash census, a sort within partitions, Arrow batches to
Python and back, a collect), so the classes a replay loads are the ones archived. Every later driver
maps them from the archive instead of parsing and verifying them again: seconds of CPU per start on a
small machine. What it leaves out is loaded as before; nothing depends on the archive being there.

    spark-submit … spark_job/warmup.py   -> prints WARMUP_DONE <rows> on success
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):  # run as a script: import the package, not this directory's modules
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

if TYPE_CHECKING:
    import pyarrow as pa

DONE = "WARMUP_DONE"
ROWS = 2_000


def _identity(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def main() -> int:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as sf

    from spark_job.arrow_map import map_in_arrow
    from spark_job.main import configure

    spark = configure(SparkSession.builder.appName("replay-warmup")).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with tempfile.TemporaryDirectory(prefix="replay-warmup-") as folder:
            table = str(Path(folder) / "table")
            rows = spark.range(ROWS).select(
                sf.col("id").cast("string").alias("event_id"),
                (sf.col("id") % 7).cast("string").alias("dt"),
                sf.timestamp_seconds(sf.col("id") + 1_700_000_000).alias("updated_at"),
                sf.concat(sf.lit("payload-"), sf.col("id").cast("string")).alias("value"),
            )
            rows.write.partitionBy("dt").parquet(table)
            selected = spark.read.parquet(table).where(sf.col("dt") != "6")
            buckets = selected.groupBy(sf.pmod(sf.hash("event_id"), sf.lit(8)).alias("b")).count().collect()
            ordered = selected.repartition(4, "event_id").sortWithinPartitions("updated_at", "event_id")
            schema = ", ".join(f"{field.name} {field.dataType.simpleString()}" for field in ordered.schema)
            passed = map_in_arrow(ordered, _identity, schema)
            ids = passed.select("event_id").toArrow()
            assert sum(row["count"] for row in buckets) == ids.num_rows
    finally:
        spark.stop()
    print(f"{DONE} {ids.num_rows}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
