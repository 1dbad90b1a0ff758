"""How fast a run's records are read back: one consumer per fetch size, and the job's follower.

The follower (``spark_job.follower``) and the reconcile's reads consume a run's whole topic. This
fills a two-partition topic with records shaped like a run's (a JSON value, the run id and event id
headers, lz4 as the job's producer sends them), then reads it from the start, in one process:

* one consumer that only counts, at each ``max.partition.fetch.bytes`` in ``--fetch-mib``
  (1 MiB is librdkafka's default);
* the job's ``TopicFollower``, ``--runs`` times: at librdkafka's default fetch size, then with the
  product's settings (``spark_job.kafka_conf.BULK_READ``).

    .venv/bin/python bench/bulk_read.py --records 1000000 --bootstrap HOST:PORT

Prints ``bulk-read consumer fetch_mib=N records_per_s=R`` and ``bulk-read follower fetch_mib=1|product
records_per_s=R``.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.broker import kafka, produce_waiting, topic
from scripts.stray_jobs import interrupt_on_sigterm
from spark_job.follower import TopicFollower
from spark_job.reconcile import RUN_ID_HEADER
from spark_job.spec.model import EVENT_ID_HEADER, KafkaValue, OffsetRanges

RUN_ID = "r-bulkread"
VALUE = b'{"order_id": 1234567, "customer_id": "c-0042", "amount": 12.5, "status": "paid"}'


def fill(bootstrap: str, name: str, records: int) -> dict[int, int]:
    """``records`` run records on ``name``; returns each partition's end offset."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"})
    for n in range(records):
        headers: list[tuple[str, str | bytes | None]] = [
            (RUN_ID_HEADER, RUN_ID.encode()),
            (EVENT_ID_HEADER, f"e-{n:012d}".encode()),
        ]
        produce_waiting(producer, name, VALUE, f"k{n % 5_000}".encode(), headers)
        if n % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0, "the topic was not filled"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bulk-read-{uuid.uuid4().hex}"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1] for p in (0, 1)}
    finally:
        consumer.close()


def consumer_rate(bootstrap: str, name: str, records: int, fetch_mib: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bulk-read-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": fetch_mib * 2**20,
        }
    )
    consumer.assign([TopicPartition(name, p, 0) for p in (0, 1)])
    read, started = 0, time.monotonic()
    try:
        while read < records:
            read += len(consumer.consume(num_messages=2_000, timeout=0.2))
        return read / (time.monotonic() - started)
    finally:
        consumer.close()


def follower_rate(bootstrap: str, name: str, ends: dict[int, int], fetch_mib: int | None) -> float:
    """The follower as a run makes it; ``fetch_mib``: as if the run's settings named that fetch size."""
    settings: dict[str, KafkaValue] = {"bootstrap.servers": bootstrap}
    if fetch_mib is not None:
        settings["max.partition.fetch.bytes"] = fetch_mib * 2**20
    started = time.monotonic()
    follower = TopicFollower(settings, name, {p: 0 for p in ends}, RUN_ID).start()
    ids, scanned = follower.finish(
        OffsetRanges(topic=name, partitions={p: (0, hi) for p, hi in ends.items()}), idle_timeout_s=30
    )
    assert len(ids) == scanned == sum(ends.values()), (len(ids), scanned)
    return scanned / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--fetch-mib", default="1,2,4,8,16", help="comma-separated MiB per partition")
    parser.add_argument("--runs", type=int, default=2, help="follower runs")
    parser.add_argument("--bootstrap", help="HOST:PORT of a running broker (default: start one)")
    args = parser.parse_args()
    interrupt_on_sigterm()  # a SIGTERM still stops the broker this run started
    with kafka(args.bootstrap) as bootstrap, topic(bootstrap, "bulk-read", 2, {}) as name:
        ends = fill(bootstrap, name, args.records)
        for fetch_mib in (int(mib) for mib in args.fetch_mib.split(",")):
            rate = consumer_rate(bootstrap, name, args.records, fetch_mib)
            print(f"bulk-read consumer fetch_mib={fetch_mib} records_per_s={rate:.0f}", flush=True)
        for _ in range(args.runs):
            for fetch, label in ((1, "1"), (None, "product")):  # librdkafka's default, then the product's
                rate = follower_rate(bootstrap, name, ends, fetch)
                print(f"bulk-read follower fetch_mib={label} records_per_s={rate:.0f}", flush=True)


if __name__ == "__main__":
    main()
