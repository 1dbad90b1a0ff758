"""The demo's last word: does the topic hold exactly the events the broker confirmed, no more, no less?

Reads the demo user's latest run from the daemon, then every record of its topic, and compares the
count and the event ids with the run's confirmed count. Exit 1 when they disagree.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
from confluent_kafka import Consumer, TopicPartition

from daemon.config.settings import load_settings
from daemon.contract.client import DaemonClient


def topic_records(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"demo-check-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in partitions}
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in ends.items()])
        remaining = sum(high - low for low, high in ends.values())
        records: list[dict[str, Any]] = []
        while remaining > 0:
            for message in consumer.consume(num_messages=5000, timeout=5):
                error, value = message.error(), message.value()
                if error is not None:
                    raise RuntimeError(error.str())
                if value is None:
                    raise RuntimeError(f"a record without a value at {topic}[{message.partition()}]")
                records.append(json.loads(value))
                remaining -= 1
        return records
    finally:
        consumer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--table", required=True, help="the source table, to show a stored encrypted value")
    parser.add_argument("--chart-dir", default=".", help="where the run's rate chart (PNG) is written")
    args = parser.parse_args()
    settings = load_settings()
    assert settings.api_token is not None and settings.user is not None
    with DaemonClient(base_url=settings.daemon_url, token=settings.api_token.get_secret_value()) as client:
        run = client.list_replays(settings.user, requester=settings.user, limit=1).runs[0]
        chart = Path(args.chart_dir) / f"{run.id}-rate.png"
        chart.write_bytes(client.chart_png(settings.user, run.id))  # what `replay chart` writes
    records = topic_records(args.bootstrap, run.topic)
    ids = [record["event_id"] for record in records]
    sample = min(records, key=lambda record: record["event_id"])
    stored = (
        ds.dataset(args.table, format="parquet", partitioning="hive")
        .to_table(columns=["email"], filter=ds.field("event_id") == sample["event_id"])["email"][0]
        .as_py()
    )
    print(f"event {sample['event_id']}: email in the lake  {stored[:48]}…")
    print(f"event {sample['event_id']}: email on the topic {sample['email']}")
    selected = run.rows_selected
    print(f"run {run.id}: {run.state}, broker-confirmed {run.confirmed:,} of {selected or 0:,} rows selected")
    print(f"topic {run.topic}: {len(ids):,} records, {len(set(ids)):,} distinct event ids")
    verdict = run.reconcile.verdict() if run.reconcile is not None else None
    print(f"reconcile {run.id}: {verdict.text if verdict else 'not reconciled'}")
    print(f"chart {run.id}: {chart} (events per second against the target, the verdict in its title)")
    ok = run.state == "succeeded" and len(ids) == len(set(ids)) == run.confirmed == selected
    ok = ok and verdict is not None and verdict.clean
    print("OK: the topic holds exactly the confirmed events" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
