"""Register lake tables in a Hive metastore by name, as a team's Spark jobs do outside AWS.

    spark-submit --jars $(scripts/lake-jars | cut -d= -f2) scripts/devtools/hive_tables.py \\
        <metastore uri> <warehouse> <delta path> <parquet path> <iceberg metadata file>

Spark's session catalog is the metastore (`spark.sql.catalogImplementation=hive`, Delta's catalog
over it), so `CREATE TABLE … USING delta|parquet LOCATION …` records each table the way Spark does for
any data source table (its provider in the table's parameters, its location in the serde's `path`);
the Iceberg table is registered through Iceberg's own Hive catalog (`register_table`), which records
its current metadata file. Database `sales`; tables `orders_delta`, `orders_parquet`,
`orders_iceberg`. Prints one `HIVE_TABLES <json>` line: the names and the location Spark reports.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

DATABASE = "sales"


def session(uri: str, warehouse: str) -> SparkSession:
    return (
        SparkSession.builder.appName("hive-tables")
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.hive.metastore.uris", uri)
        .config("spark.sql.warehouse.dir", warehouse)
        .config(
            "spark.sql.extensions",
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,io.delta.sql.DeltaSparkSessionExtension",
        )
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.catalog.metastore", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.metastore.type", "hive")
        .config("spark.sql.catalog.metastore.uri", uri)
        # Hive 2.3.10 commits a table by its expected parameters (HIVE-26882): no metastore lock needed
        .config("spark.hadoop.iceberg.engine.hive.lock-enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .enableHiveSupport()
        .getOrCreate()
    )


def location(spark: SparkSession, table: str) -> str:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
    return next(str(row.data_type) for row in rows if row.col_name == "Location")


def main(argv: list[str]) -> None:
    uri, warehouse, delta, parquet, iceberg_metadata = argv
    spark = session(uri, warehouse)
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {DATABASE}.orders_delta USING delta LOCATION '{delta}'")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {DATABASE}.orders_parquet USING parquet LOCATION '{parquet}'")
    spark.sql(
        f"CALL metastore.system.register_table(table => '{DATABASE}.orders_iceberg', "
        f"metadata_file => '{iceberg_metadata}')"
    )
    seen = {
        "delta": {
            "table": f"{DATABASE}.orders_delta",
            "location": location(spark, f"{DATABASE}.orders_delta"),
        },
        "parquet": {
            "table": f"{DATABASE}.orders_parquet",
            "location": location(spark, f"{DATABASE}.orders_parquet"),
        },
        "iceberg": {"table": f"{DATABASE}.orders_iceberg", "metadata": iceberg_metadata},
    }
    print("HIVE_TABLES " + json.dumps(seen), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
