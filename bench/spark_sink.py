"""The peer a user would otherwise reach for: Spark's built-in Kafka sink, ``df.write.format("kafka")``.

Imported by bench/e2e.py, which calls :func:`submit`; run by ``spark-submit`` as the application
itself. It reads the same lake table the product replays, builds the value as JSON in the JVM (all
columns but the partition column, like the product's default ``value_format: json``), adds the same
headers, and writes with the job's producer settings mapped onto the Java client. No rate control,
no per-entity ordering: the sink has neither. Its jars come from ``scripts/spark-kafka-jars``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from spark_job.kafka_conf import producer_config

# librdkafka names of the job's settings -> the Java client's; librdkafka-only ones have no peer.
JAVA_NAMES = {
    "linger.ms": "linger.ms",
    "batch.size": "batch.size",
    "compression.type": "compression.type",
    "acks": "acks",
    "enable.idempotence": "enable.idempotence",
    "message.timeout.ms": "delivery.timeout.ms",
}


def java_options(bootstrap: str, tuning: dict[str, int | str] | None = None) -> dict[str, str]:
    """The job's unthrottled producer settings (with the daemon's ``tuning``) as ``kafka.*`` options
    of Spark's sink."""
    # librdkafka allocates batches as records come; the Java client reserves batch.size per partition
    # from buffer.memory (default 32 MB), so 1 MB batches on 64 partitions would block on memory the
    # C client never needs. Room for them, well under librdkafka's own queue limit (1 GB).
    options = {"kafka.bootstrap.servers": bootstrap, "kafka.buffer.memory": str(256 * 1024 * 1024)}
    config = producer_config({"bootstrap.servers": bootstrap, **(tuning or {})}, unthrottled=True)
    for name, value in config.items():
        if name in JAVA_NAMES:
            options[f"kafka.{JAVA_NAMES[name]}"] = (
                str(value).lower() if isinstance(value, bool) else str(value)
            )
    return options


def submit(
    jars: list[Path],
    table: Path,
    target: str,
    bootstrap: str,
    headers: dict[str, str],
    tuning: dict[str, int | str] | None = None,
) -> float:
    """spark-submit this file on ``local[2]``; the wall time it was started at (for first_event_s)."""
    submit_bin = str(Path(sys.executable).with_name("spark-submit"))
    env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    argument = json.dumps(
        {"table": str(table), "topic": target, "options": java_options(bootstrap, tuning), "headers": headers}
    )
    command = [
        submit_bin,
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.session.timeZone=UTC",
        "--jars",
        ",".join(str(jar) for jar in jars),
        __file__,
        argument,
    ]
    started = time.time()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env}, check=False)
    if done.returncode != 0 or "SINK_DONE" not in done.stdout:
        raise RuntimeError(
            f"Spark's Kafka sink failed (exit {done.returncode}): {done.stderr.strip()[-1500:]}"
        )
    return started


def _application(argument: str) -> None:
    # Imported here: the launcher side (bench/e2e.py) must not load pyspark.
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812 (pyspark's own convention)

    spec = json.loads(argument)
    spark = SparkSession.builder.appName("bench-spark-kafka-sink").getOrCreate()
    rows = spark.read.parquet(spec["table"])
    columns = [name for name in rows.columns if name != "dt"]
    header_structs = [
        F.struct(F.lit(key).alias("key"), F.lit(value).cast("binary").alias("value"))
        for key, value in spec["headers"].items()
    ]
    header_structs.append(
        F.struct(F.lit("replay-event-id").alias("key"), F.col("event_id").cast("binary").alias("value"))
    )
    records = rows.select(
        F.col("order_id").alias("key"),
        F.to_json(F.struct(*columns)).alias("value"),
        F.array(*header_structs).alias("headers"),
    )
    writer = records.write.format("kafka").option("topic", spec["topic"])
    for name, value in spec["options"].items():
        writer = writer.option(name, value)
    writer.save()
    print("SINK_DONE", flush=True)
    spark.stop()


if __name__ == "__main__":
    _application(sys.argv[1])
