"""How much does the job cost against a bare producer loop, unthrottled, on the same broker?

    .venv/bin/python bench/throughput.py [--rows 1000000] [--slots 2] [--bootstrap HOST:PORT]

Runs the job with ``tps=0`` (its rate is confirmed / publish seconds, Spark start-up excluded), then
sends the same records, pre-built in memory, from one process with a plain confluent-kafka loop
using the same producer settings (idempotent, acks=all, the job's batching), counting delivery
reports the same way. Final line:

    throughput job=<ev/s> raw=<ev/s> ratio=<job/raw> size=<average value bytes>
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
from confluent_kafka import KafkaError, Message, Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: import bench.throttle

from bench.throttle import kafka, run_job, sample_table, spec_for, topic
from spark_job.kafka_conf import producer_config


def prebuilt_records(table: Path) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs shaped like the job's: the row as compact JSON, keyed by order."""
    rows = ds.dataset(table, format="parquet", partitioning="hive").to_table().to_pylist()
    records = []
    for row in rows:
        row["updated_at"] = row["updated_at"].isoformat(timespec="milliseconds").replace("+00:00", "Z")
        records.append((row["order_id"].encode(), json.dumps(row, separators=(",", ":")).encode()))
    return records


def raw_rate(bootstrap: str, target: str, records: list[tuple[bytes, bytes]], extra: dict[str, Any]) -> float:
    """Events per second of one process producing every record and waiting for every report."""
    confirmed = 0
    failed: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        nonlocal confirmed
        if error is None:
            confirmed += 1
        else:
            failed.append(error)

    producer = Producer(
        {**producer_config({"bootstrap.servers": bootstrap, **extra}), "on_delivery": on_delivery}
    )
    headers: list[tuple[str, str | bytes | None]] = [
        ("replay-run-id", b"bench"),
        ("replay-source", b"orders"),
        ("replay-window", b"dt all"),
    ]
    started = time.perf_counter()
    for count, (key, value) in enumerate(records):
        while True:
            try:
                producer.produce(target, value, key, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
        if count % 1000 == 0:
            producer.poll(0)
    producer.flush()
    elapsed = time.perf_counter() - started
    if failed or confirmed != len(records):
        raise SystemExit(f"raw loop: {confirmed} confirmed of {len(records)}, errors {failed[:3]}")
    return confirmed / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description="Unthrottled job against a bare producer loop.")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--slots", type=int, default=2, help="the job runs with --master local[SLOTS]")
    parser.add_argument("--bootstrap", help="HOST:PORT of a running broker (default: start one)")
    parser.add_argument("--compression", help="override compression.type for both (job default: lz4)")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the target topics")
    args = parser.parse_args()
    extra = {"compression.type": args.compression} if args.compression else {}
    with (
        tempfile.TemporaryDirectory(prefix="bench-throughput-") as scratch,
        kafka(args.bootstrap) as bootstrap,
    ):
        directory = Path(scratch)
        table = sample_table(directory, args.rows)
        with topic(bootstrap, "bench-job", args.partitions, {}) as target:
            spec = spec_for(table, bootstrap, target, 0, "none", **extra)
            result = run_job(spec, directory, f"local[{args.slots}]")
        records = prebuilt_records(table)
        with topic(bootstrap, "bench-raw", args.partitions, {}) as target:
            raw = raw_rate(bootstrap, target, records, extra)
    job = result["achieved_tps"]
    size = sum(len(value) for _, value in records) / len(records)
    print(f"rows={result['confirmed']} slots={args.slots} compression={args.compression or 'lz4 (default)'}")
    print(f"throughput job={job:.0f} raw={raw:.0f} ratio={job / raw:.3f} size={size:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
