"""The sample "orders" table as an Iceberg and a Delta table, written by Spark as a backup job would.

    spark-submit --jars $(scripts/lake-jars | cut -d= -f2) scripts/devtools/lake_tables.py \\
        create <sample parquet dir> <iceberg warehouse> <delta path>
    spark-submit --jars ... scripts/devtools/lake_tables.py append <iceberg warehouse> <day> <rows>
    spark-submit --jars ... scripts/devtools/lake_tables.py copy <sample> <iceberg warehouse> <delta path>

`create` copies the Parquet sample into both formats over several commits, partitioned by day (`dt`,
a date): the first days, then the rest, then a delete (the window's cancelled orders of one day) and
an overwrite of another day with the same rows minus a few, and last a delete of the newest event (by
`updated_at`; Iceberg's as a delete file, merge-on-read), so the newest value in the table's metadata is
one no row holds. It prints one `LAKE_TABLES <json>` line: each table's path, its first and current
snapshot, and the truth a full scan of each sees (rows per day and the newest `updated_at` in epoch
microseconds, now and at the first commit), which the tests hold the metadata to. `append` commits
`rows` new events (`late-<day>-<n>`) into one day of the Iceberg table and prints its new snapshot (the
Delta table is appended to without Spark, with the `deltalake` package). The Iceberg table lives in a
Hadoop catalog, so its path is `<warehouse>/sample/orders`. `copy` writes the same rows in one commit
to each (bench/e2e.py's `--formats`).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

ICEBERG_TABLE = "lake.sample.orders"
FIRST_DAYS = 4  # the first commit holds the first four days
DELETED_DAY, OVERWRITTEN_DAY = "2024-01-02", "2024-01-03"


def session(warehouse: str) -> SparkSession:
    return (
        SparkSession.builder.appName("lake-tables")
        .config(
            "spark.sql.extensions",
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,io.delta.sql.DeltaSparkSessionExtension",
        )
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.catalog.lake", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.lake.type", "hadoop")
        .config("spark.sql.catalog.lake.warehouse", warehouse)
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


def per_day(frame: DataFrame) -> dict[str, int]:
    rows = frame.groupBy(sf.col("dt").cast("string").alias("day")).count().collect()
    return {row.day: row["count"] for row in sorted(rows, key=lambda row: row.day)}


def create(spark: SparkSession, parquet: str, warehouse: str, delta: str) -> dict[str, Any]:
    sample = spark.read.parquet(parquet).withColumn("dt", sf.col("dt").cast("date"))
    days = sorted(row.dt for row in sample.select("dt").distinct().collect())
    first = sample.where(sf.col("dt") <= days[FIRST_DAYS - 1])
    rest = sample.where(sf.col("dt") > days[FIRST_DAYS - 1])
    kept = sample.where(f"dt = '{OVERWRITTEN_DAY}' AND NOT event_id LIKE '%0'")  # a tenth fewer rows

    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.sample")
    first.writeTo(ICEBERG_TABLE).using("iceberg").partitionedBy(sf.col("dt")).create()
    iceberg_first = _iceberg_snapshot(spark)
    rest.writeTo(ICEBERG_TABLE).append()
    spark.sql(f"DELETE FROM {ICEBERG_TABLE} WHERE dt = '{DELETED_DAY}' AND status = 'cancelled'")  # noqa: S608
    kept.writeTo(ICEBERG_TABLE).overwritePartitions()

    first.write.format("delta").partitionBy("dt").save(delta)
    rest.write.format("delta").mode("append").save(delta)
    spark.sql(f"DELETE FROM delta.`{delta}` WHERE dt = '{DELETED_DAY}' AND status = 'cancelled'")  # noqa: S608
    kept.write.format("delta").mode("overwrite").option("replaceWhere", f"dt = '{OVERWRITTEN_DAY}'").save(
        delta
    )
    newest = f"updated_at = timestamp_micros({newest_us(sample)})"  # it goes: a bound no row holds
    spark.sql(f"ALTER TABLE {ICEBERG_TABLE} SET TBLPROPERTIES ('write.delete.mode' = 'merge-on-read')")
    spark.sql(f"DELETE FROM {ICEBERG_TABLE} WHERE {newest}")  # noqa: S608
    spark.sql(f"DELETE FROM delta.`{delta}` WHERE {newest}")  # noqa: S608

    def iceberg_at(snapshot: int) -> DataFrame:  # a reader per read: `.option` changes the reader
        return spark.read.format("iceberg").option("snapshot-id", snapshot).load(ICEBERG_TABLE)

    def delta_at(version: int | None = None) -> DataFrame:
        reader = spark.read.format("delta")
        return (reader if version is None else reader.option("versionAsOf", version)).load(delta)

    return {
        "spark": spark.version,
        "iceberg": {
            "path": f"{warehouse.rstrip('/')}/sample/orders",
            "first_snapshot": str(iceberg_first),
            "snapshot": str(_iceberg_snapshot(spark)),
            "days": per_day(spark.table(ICEBERG_TABLE)),
            "first_days": per_day(iceberg_at(iceberg_first)),
            "high_us": newest_us(spark.table(ICEBERG_TABLE)),
            "first_high_us": newest_us(iceberg_at(iceberg_first)),
        },
        "delta": {
            "path": delta,
            "first_snapshot": "0",
            "snapshot": str(_first(spark.sql(f"DESCRIBE HISTORY delta.`{delta}`").agg(sf.max("version")))),
            "days": per_day(delta_at()),
            "first_days": per_day(delta_at(0)),
            "high_us": newest_us(delta_at()),
            "first_high_us": newest_us(delta_at(0)),
        },
    }


def newest_us(frame: DataFrame) -> int:
    """The newest ``updated_at`` a scan sees, in microseconds since the epoch (no time zone to guess)."""
    return int(_first(frame.agg(sf.unix_micros(sf.max("updated_at")))))


def copy(spark: SparkSession, parquet: str, warehouse: str, delta: str) -> dict[str, Any]:
    """The same rows, one commit each: what the three-format bench compares."""
    sample = spark.read.parquet(parquet).withColumn("dt", sf.col("dt").cast("date"))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.sample")
    sample.writeTo(ICEBERG_TABLE).using("iceberg").partitionedBy(sf.col("dt")).create()
    sample.write.format("delta").partitionBy("dt").save(delta)
    return {
        "spark": spark.version,
        "iceberg": {"path": f"{warehouse.rstrip('/')}/sample/orders"},
        "delta": {"path": delta},
    }


def late_rows(spark: SparkSession, like: DataFrame, day: str, count: int) -> DataFrame:
    """``count`` new events in ``day``, shaped like the table's rows."""
    template = like.where(f"dt = '{day}'").limit(1).first()
    assert template is not None, f"no row on {day} to shape the late rows after"
    base = template.asDict()
    rows = [
        {**base, "event_id": f"late-{day}-{index}", "order_id": f"late-{index}"} for index in range(count)
    ]
    return spark.createDataFrame(rows, schema=like.schema)


def append(spark: SparkSession, day: str, count: int) -> dict[str, Any]:
    table = spark.table(ICEBERG_TABLE)
    late_rows(spark, table, day, count).writeTo(ICEBERG_TABLE).append()
    return {"iceberg": {"snapshot": str(_iceberg_snapshot(spark))}}


def _iceberg_snapshot(spark: SparkSession) -> int:
    history = spark.sql(f"SELECT snapshot_id FROM {ICEBERG_TABLE}.history ORDER BY made_current_at DESC")  # noqa: S608
    return int(_first(history))


def _first(frame: DataFrame) -> Any:
    """The first column of the first row (there is one: the table has been written)."""
    row = frame.first()
    assert row is not None
    return row[0]


def main(argv: list[str]) -> None:
    mode, *args = argv
    warehouse = args[1] if mode in ("create", "copy") else args[0]
    spark = session(warehouse)
    spark.sparkContext.setLogLevel("ERROR")
    if mode in ("create", "copy"):
        parquet, _, delta = args
        seen = (create if mode == "create" else copy)(spark, parquet, warehouse, delta)
    else:
        _, day, count = args
        seen = append(spark, day, int(count))
    print("LAKE_TABLES " + json.dumps(seen), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
