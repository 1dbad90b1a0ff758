"""Does the real job hold the requested TPS, second by second, as the broker saw it?

    .venv/bin/python bench/throttle.py --tps 500 --slots 8 --seconds 25 [--bootstrap HOST:PORT]

Writes a sample table of tps x seconds rows, runs ``spark_job/main.py`` with ``spark-submit
--master local[SLOTS]`` into a fresh topic with ``message.timestamp.type=LogAppendTime``, reads the
broker's timestamps back and buckets them per second. The first second (warm-up) and the last
(partial) are dropped. Final line:

    throttle tps=T slots=W achieved=<mean/s> ratio=<achieved/T> p95_dev=<p95 |per-second error| / T>
             tail=<fraction of seconds below 95 % of T>

Without ``--bootstrap`` a broker is started with ``scripts/local-kafka`` in a temporary state dir
and stopped at the end. Topics the bench creates are deleted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: import scripts.devtools

from scripts.devtools.sample_table import write_sample_table

REPO = Path(__file__).resolve().parents[1]
MAIN = REPO / "spark_job" / "main.py"
DAYS = 7


@contextlib.contextmanager
def kafka(bootstrap: str | None) -> Iterator[str]:
    """The given broker, or a throwaway one from scripts/local-kafka."""
    if bootstrap:
        yield bootstrap
        return
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as state:
        script = str(REPO / "scripts" / "local-kafka")
        started = subprocess.run(
            [script, "start", "--state-dir", state], capture_output=True, text=True, check=True
        )
        line = [text for text in started.stdout.splitlines() if text.startswith("bootstrap=")][-1]
        try:
            yield line.removeprefix("bootstrap=").strip()
        finally:
            subprocess.run([script, "stop", "--state-dir", state], capture_output=True, check=False)


@contextlib.contextmanager
def topic(bootstrap: str, prefix: str, partitions: int, config: dict[str, str]) -> Iterator[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(30)
    try:
        yield name
    finally:
        admin.delete_topics([name])[name].result(30)


def sample_table(directory: Path, rows: int) -> Path:
    table = directory / "orders"
    write_sample_table(table, date(2024, 1, 1), DAYS, max(1, math.ceil(rows / DAYS)), seed=11)
    return table


def run_job(spec: dict[str, Any], directory: Path, master: str) -> dict[str, Any]:
    """spark-submit the job and return its REPLAY_RESULT document."""
    path = directory / "spec.json"
    path.write_text(json.dumps(spec))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    submit = str(Path(sys.executable).with_name("spark-submit"))
    command = [submit, "--master", master, "--conf", "spark.ui.enabled=false", str(MAIN), str(path)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    final = [
        line for line in done.stdout.splitlines() if line.startswith(("REPLAY_RESULT ", "REPLAY_FAILED "))
    ]
    if done.returncode != 0 or not final or not final[-1].startswith("REPLAY_RESULT "):
        raise SystemExit(f"job failed: {final[-1] if final else done.stdout[-3000:] + done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(final[-1].partition(" ")[2])
    return result


def spec_for(
    table: Path, bootstrap: str, target: str, tps: int, ordering: str, **extra: Any
) -> dict[str, Any]:
    return {
        "run_id": f"bench-{uuid.uuid4().hex[:8]}",
        "source": {"name": "orders", "path": str(table)},
        "window": {"column": "dt", "start_day": "2024-01-01", "end_day": f"2024-01-0{DAYS}"},
        "topic": target,
        "kafka": {"bootstrap.servers": bootstrap, **extra},
        "tps": tps,
        "key_column": "order_id",
        "event_id_column": "event_id",
        "event_time_column": "updated_at",
        "ordering": ordering,
        "progress": {"topic": "replay.progress.bench", "interval_s": 10},
    }


def broker_timestamps(bootstrap: str, name: str, expected: int, timeout_s: float = 120.0) -> list[int]:
    """Every record's broker (LogAppendTime) timestamp in ms."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}"})
    partitions = consumer.list_topics(name, timeout=10).topics[name].partitions
    consumer.assign([TopicPartition(name, p, 0) for p in partitions])
    stamps: list[int] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(stamps) < expected and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.5):
                if message.error() is None:
                    stamps.append(message.timestamp()[1])
    finally:
        consumer.close()
    return stamps


def per_second(stamps: list[int], tps: int) -> list[int]:
    """Records per whole second, windows starting half an event interval before the first record.

    A perfectly paced stream puts an event every 1/tps s, so at low TPS windows aligned on an
    event would split ms-level broker jitter into 4/6 pairs; aligning between events does not.
    """
    origin = min(stamps) - 500 / tps
    counts = Counter(int((stamp - origin) // 1000) for stamp in stamps)
    return [counts.get(second, 0) for second in range(max(counts) + 1)]


def figures(seconds: list[int], tps: int) -> dict[str, float]:
    if not seconds:
        return {"achieved": math.nan, "ratio": math.nan, "p95_dev": math.nan, "tail": math.nan}
    achieved = sum(seconds) / len(seconds)
    deviations = sorted(abs(count - tps) / tps for count in seconds)
    p95 = deviations[min(len(deviations) - 1, math.ceil(0.95 * len(deviations)) - 1)]
    tail = sum(1 for count in seconds if count < 0.95 * tps) / len(seconds)
    return {"achieved": achieved, "ratio": achieved / tps, "p95_dev": p95, "tail": tail}


def main() -> int:
    parser = argparse.ArgumentParser(description="Measure the aggregate TPS the job holds, per second.")
    parser.add_argument("--tps", type=int, required=True)
    parser.add_argument("--slots", type=int, required=True, help="W: the job runs with --master local[W]")
    parser.add_argument("--seconds", type=int, default=25)
    parser.add_argument("--bootstrap", help="HOST:PORT of a running broker (default: start one)")
    parser.add_argument("--ordering", choices=["none", "entity"], default="none")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of the target topic")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-throttle-") as scratch, kafka(args.bootstrap) as bootstrap:
        directory = Path(scratch)
        rows = args.tps * args.seconds
        table = sample_table(directory, rows)
        config = {"message.timestamp.type": "LogAppendTime"}
        with topic(bootstrap, "bench-throttle", args.partitions, config) as target:
            spec = spec_for(table, bootstrap, target, args.tps, args.ordering)
            result = run_job(spec, directory, f"local[{args.slots}]")
            stamps = broker_timestamps(bootstrap, target, result["confirmed"])
    every_second = per_second(stamps, args.tps)
    seconds = every_second[1:-1]  # without the warm-up second and the partial last one
    found = figures(seconds, args.tps)
    print(f"rows={result['rows_selected']} confirmed={result['confirmed']} read_back={len(stamps)}")
    print(
        f"partitions={result['partitions']} skew={result['partition_skew']} job_tps={result['achieved_tps']}"
    )
    print(
        f"behind_schedule_s={result['behind_schedule_s']} late_start_s={result['late_start_s']} "
        f"seconds_measured={len(seconds)}"
    )
    print(f"per_second={every_second}")
    print(
        f"throttle tps={args.tps} slots={args.slots} achieved={found['achieved']:.2f} "
        f"ratio={found['ratio']:.4f} p95_dev={found['p95_dev']:.4f} tail={found['tail']:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
