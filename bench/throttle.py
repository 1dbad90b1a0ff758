"""Does the real job hold the requested TPS, second by second, as the broker saw it?

    .venv/bin/python bench/throttle.py --tps 500 --slots 8 [--seconds 25] [--ordering entity|none]
        [--bootstrap HOST:PORT]

Writes a sample table of tps x seconds rows, runs ``spark_job/main.py`` with ``spark-submit
--master local[SLOTS]`` (no daemon: bench/e2e.py is the user's path) into a fresh topic with
``message.timestamp.type=LogAppendTime``, reads the broker's timestamps back and buckets them per
second (bench/seconds.py). The default ordering is the product's, ``entity``.

No second is dropped silently. The first second and the last are partial by definition (the first
holds what the tasks' start-up let through, the last ends with the window), so the figures come twice:
*trimmed*, without those two seconds (achieved, ratio, p95_dev and tail), and *full*, over every
second. ``max_second_ratio`` (the largest second / T) is always over every second: a burst is never
trimmed away. Final line (trimmed, and the max over every second):

    throttle tps=T slots=W ordering=O achieved=<mean/s> ratio=<achieved/T> p95_dev=<p95 |error| / T>
             max_second_ratio=<largest second / T> tail=<share of seconds below 95 % of T>

preceded by ``throttle-all-seconds ...`` with the same figures over every second.
Without ``--bootstrap`` a broker is started with ``scripts/local-kafka`` in a temporary state dir
and stopped at the end. Topics the bench creates are deleted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import uuid
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: import bench, scripts

from bench.broker import kafka, read_back, topic
from bench.seconds import per_second, summary
from scripts.devtools.sample_table import write_sample_table
from scripts.stray_jobs import interrupt_on_sigterm

REPO = Path(__file__).resolve().parents[1]
MAIN = REPO / "spark_job" / "main.py"
DAYS = 7


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


def main() -> int:
    parser = argparse.ArgumentParser(description="Measure the aggregate TPS the job holds, per second.")
    parser.add_argument("--tps", type=int, required=True)
    parser.add_argument("--slots", type=int, required=True, help="W: the job runs with --master local[W]")
    parser.add_argument("--seconds", type=int, default=25)
    parser.add_argument("--bootstrap", help="HOST:PORT of a running broker (default: start one)")
    parser.add_argument("--ordering", choices=["none", "entity"], default="entity")
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
            stamps = read_back(bootstrap, target).stamps
    every_second = per_second(stamps, args.tps)
    whole, full = summary(every_second, args.tps)
    print(f"rows={result['rows_selected']} confirmed={result['confirmed']} read_back={len(stamps)}")
    print(
        f"partitions={result['partitions']} skew={result['partition_skew']} job_tps={result['achieved_tps']}"
    )
    print(
        f"behind_schedule_s={result['behind_schedule_s']} late_start_s={result['late_start_s']} "
        f"seconds_measured={whole.seconds} (of {full.seconds}: the first and the last are partial)"
    )
    print(f"per_second={every_second}")
    print(f"throttle-all-seconds tps={args.tps} slots={args.slots} ordering={args.ordering} {full.line()}")
    print(f"throttle tps={args.tps} slots={args.slots} ordering={args.ordering} {whole.line()}")
    return 0


if __name__ == "__main__":
    interrupt_on_sigterm()  # a SIGTERM still stops the broker and daemons this run started
    raise SystemExit(main())
