"""Does a window several times larger than Spark's memory replay, with a clean reconcile?

    .venv/bin/python bench/window_memory.py [--rows 3000000] [--memory 512m] [--bootstrap HOST:PORT]

docs/rules.md rule 11: the job never holds the window. Writes a narrow table (event id, order id,
event time; ~100-byte JSON values) of ``--rows`` rows, runs ``spark_job/main.py`` unthrottled with
``spark-submit --driver-memory MEMORY --master local[2]`` (local mode: the driver's heap is the
executors' too) with ``ordering=entity`` (the shuffle and the sort must spill, not hold), and reads
the peak resident memory of the job's process tree while it runs. Final line:

    window-memory rows=<n> memory=<heap> status=<succeeded|failed> confirmed=<n> missing=<n>
                  duplicates=<n> seconds=<wall> peak_rss_mb=<MB> first_event_s=<s>

It is a bench, not a test: a few million rows take minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: import bench.broker

from bench.broker import kafka, topic
from scripts.stray_jobs import interrupt_on_sigterm

REPO = Path(__file__).resolve().parents[1]
MAIN = REPO / "spark_job" / "main.py"
DAYS = ("2024-01-01", "2024-01-02")


def narrow_table(directory: Path, rows: int) -> Path:
    """``rows`` narrow rows over two day partitions; ~3 events per order, times increasing."""
    table = directory / "narrow"
    per_day = -(-rows // len(DAYS))
    for number, day in enumerate(DAYS):
        first = number * per_day
        count = min(per_day, rows - first)
        index = pa.array(range(first, first + count), pa.int64())
        ids = pc.binary_join_element_wise("e-", pc.utf8_lpad(pc.cast(index, pa.string()), 10, "0"), "")
        orders = pc.binary_join_element_wise("o-", pc.cast(pc.divide(index, 3), pa.string()), "")
        stamps = pc.cast(pc.add(index, 1_704_067_200_000), pa.timestamp("ms", tz="UTC"))
        part = pa.table({"event_id": ids, "order_id": orders, "updated_at": stamps})
        (table / f"dt={day}").mkdir(parents=True)
        pq.write_table(part, table / f"dt={day}" / "part-0.parquet")
    return table


def narrow_spec(table: Path, bootstrap: str, topic: str, *, run_id: str) -> dict[str, Any]:
    """The job spec that replays the whole narrow table unthrottled, entity-ordered."""
    return {
        "run_id": run_id,
        "source": {"name": "narrow", "path": str(table), "format": "parquet"},
        "window": {"column": "dt", "start_day": DAYS[0], "end_day": DAYS[-1]},
        "topic": topic,
        "kafka": {"bootstrap.servers": bootstrap},
        "tps": 0,
        "key_column": "order_id",
        "event_id_column": "event_id",
        "event_time_column": "updated_at",
        "ordering": "entity",
        "progress": {"topic": "replay.progress.bench", "interval_s": 5},
    }


def tree_rss_mb(root: int) -> float:
    """Resident memory of ``root`` and all its descendants, from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            status = (Path("/proc") / str(pid) / "status").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")), 0)
    return total / 1024


def run(main: Path, spec_path: Path, memory: str) -> tuple[int, str, str, float]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    submit = str(Path(sys.executable).with_name("spark-submit"))
    command = [submit, "--master", "local[2]", "--driver-memory", memory, "--conf", "spark.ui.enabled=false"]
    job = subprocess.Popen(
        [*command, str(main), str(spec_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    peak = 0.0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.5):
            peak = max(peak, tree_rss_mb(job.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = job.communicate()
    done.set()
    sampler.join()
    return job.returncode, stdout, stderr, peak


def main() -> int:
    parser = argparse.ArgumentParser(description="A window larger than memory, replayed.")
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--memory", default="512m", help="spark-submit --driver-memory")
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--main", type=Path, default=MAIN, help="the job's entry point (another checkout's)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as scratch, kafka(args.bootstrap) as bootstrap:
        directory = Path(scratch)
        table = narrow_table(directory, args.rows)
        with topic(bootstrap, "bench-memory", 3, {}) as target:
            spec = narrow_spec(table, bootstrap, target, run_id=f"memory-{int(time.time())}")
            spec_path = directory / "spec.json"
            spec_path.write_text(json.dumps(spec))
            started = time.monotonic()
            code, stdout, stderr, peak = run(args.main, spec_path, args.memory)
            seconds = time.monotonic() - started
    finals = [line for line in stdout.splitlines() if line.startswith(("REPLAY_RESULT ", "REPLAY_FAILED "))]
    if not finals:
        print(stderr[-3000:])
        raise SystemExit(f"no final line (exit {code})")
    document = json.loads(finals[-1].partition(" ")[2])
    reconciled = document.get("reconcile") or {}
    first = [line for line in stderr.splitlines() if "phase=first_event" in line]
    first_s = first[-1].rsplit("t=", 1)[1] if first else None
    print(f"phases: {[line.split(' ', 3)[-1] for line in stderr.splitlines() if ' phase=' in line]}")
    if document["status"] != "succeeded":
        print(f"reason: {document['reason']}")
    print(
        f"window-memory rows={args.rows} memory={args.memory} status={document['status']} "
        f"confirmed={document.get('confirmed')} missing={reconciled.get('missing')} "
        f"duplicates={reconciled.get('duplicates')} seconds={seconds:.1f} peak_rss_mb={peak:.0f} "
        f"first_event_s={first_s}"
    )
    return 0 if document["status"] == "succeeded" else 1


if __name__ == "__main__":
    interrupt_on_sigterm()  # a SIGTERM still stops the broker and daemons this run started
    raise SystemExit(main())
