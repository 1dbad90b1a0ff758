"""Submitted by tests/spark_job/test_lake_runtimes.py with the release's lake jars: writes an Iceberg
and a Delta table the way a backup job would (day-partitioned, several commits, a delete and an
overwrite among them) and prints, as one JSON line, the ids each read sees now and at its first
commit. Not a test itself: `spark-submit tests/spark_job/lake_probe.py <warehouse dir>`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark.sql import SparkSession


def ids(frame: Any) -> list[str]:
    return sorted(row.event_id for row in frame.select("event_id").collect())


def rows(spark: SparkSession, day: str, count: int, prefix: str = "e") -> Any:
    data = [(f"{prefix}-{day}-{index}", day) for index in range(count)]
    return spark.createDataFrame(data, "event_id string, day string").selectExpr(
        "event_id", "to_date(day) AS day"
    )


def iceberg(spark: SparkSession) -> dict[str, object]:
    spark.sql("CREATE TABLE lake.db.events (event_id string, day date) USING iceberg PARTITIONED BY (day)")
    rows(spark, "2024-01-01", 3).writeTo("lake.db.events").append()
    first = spark.sql("SELECT snapshot_id FROM lake.db.events.snapshots").collect()[0].snapshot_id
    rows(spark, "2024-01-02", 3).writeTo("lake.db.events").append()
    spark.sql("DELETE FROM lake.db.events WHERE event_id = 'e-2024-01-01-0'")
    rows(spark, "2024-01-02", 2, prefix="fixed").writeTo("lake.db.events").overwritePartitions()
    table = spark.read.format("iceberg")
    return {
        "now": ids(spark.table("lake.db.events")),
        "first": ids(table.option("snapshot-id", first).load("lake.db.events")),
        "commits": spark.sql("SELECT count(*) AS n FROM lake.db.events.snapshots").collect()[0].n,
        "partitions": [
            str(row.partition.day)
            for row in spark.sql("SELECT partition FROM lake.db.events.partitions").collect()
        ],
    }


def delta(spark: SparkSession, path: str) -> dict[str, object]:
    writer = rows(spark, "2024-01-01", 3).write.format("delta").partitionBy("day")
    writer.save(path)
    rows(spark, "2024-01-02", 3).write.format("delta").mode("append").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE event_id = 'e-2024-01-01-0'")  # noqa: S608 (the test's own dir)
    (
        rows(spark, "2024-01-02", 2, prefix="fixed")
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", "day = '2024-01-02'")
        .save(path)
    )
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    return {
        "now": ids(spark.read.format("delta").load(path)),
        "first": ids(spark.read.format("delta").option("versionAsOf", 0).load(path)),
        "commits": len(history),
        "partitions": sorted({str(row.day) for row in spark.read.format("delta").load(path).collect()}),
    }


def main(warehouse: str) -> None:
    spark = SparkSession.builder.appName("lake-probe").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    seen = {
        "spark": spark.version,
        "iceberg": iceberg(spark),
        "delta": delta(spark, f"{warehouse}/delta-events"),
    }
    print("LAKE_PROBE " + json.dumps(seen), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
