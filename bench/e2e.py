"""What a user gets, end to end: `replay` CLI -> replayd -> the job -> the broker, timed by the broker.

    .venv/bin/python bench/e2e.py [--rows 15000] [--tps 1000] [--ordering entity|none] [--runs N]
        [--workers W]                                     # slots: the run's workers= (default: the daemon's)
        [--start warm|cold|both]                          # a ready standby driver, none, or one of each
    .venv/bin/python bench/e2e.py --max [--rows 1000000]  # unthrottled: vs a bare loop and Spark's sink
        [--profile DIR]                                   # py-spy on the job's Python workers
    [--producer '{"linger.ms": 20}']                      # the daemon's REPLAY_KAFKA_PRODUCER (tuning)
    .venv/bin/python bench/e2e.py --concurrent 3 --tps 3000 --rows 90000  # admission: N at once
    .venv/bin/python bench/e2e.py --formats parquet,iceberg,delta  # the same rows from each table format
    .venv/bin/python bench/e2e.py --selective 0.01 --rows 1000000 --tps 5000  # 1 % of the window by key
    .venv/bin/python bench/e2e.py --shaped 60 --window 2024-01-01T08:00..2024-01-01T10:00 --tps 2000 \
        --rows 200000   # tps=original speed=60x max=2000 on a day with a daily curve and bursts
    [--bootstrap HOST:PORT]                               # default: a throwaway broker

Seeds the sample `orders` table (7 daily partitions), starts ``replayd`` as ``scripts/demo`` does (local
launcher, SQLite in a temporary state dir, the product's defaults), asks ``replay plan`` for the ETA,
then runs ``replay orders <7 days> tps=T ordering=O --follow --json`` into the run's auto topic, which
the daemon creates with ``message.timestamp.type=LogAppendTime`` (checked, and said, per run). Every
figure is taken from the broker's stamps of the records read back, and one line per run is printed:

    e2e rows= tps= achieved= ratio= p95_dev= max_second_ratio= tail= whole_run= span_ratio= first_event_s=
        done_after_last_s= eta_error= daemon_rss_mb_before= daemon_rss_mb_after= job_peak_mb=
        job_rss_peak_mb= ordering= workers= start= run=

Seconds are bucketed as in bench/seconds.py: achieved/ratio/p95_dev/tail leave out the first and the
last (partial) second, max_second_ratio is over every second, and a line `e2e-all-seconds` gives the
untrimmed figures. whole_run is rows / (last - first stamp) and span_ratio whole_run / T: how much of
the promised speed the whole run delivered, its partial first and last seconds included (what the
rate contract promises on small windows too). first_event_s runs from the CLI command to the first
record's broker stamp (start=warm: the command was given once the daemon's standby driver was ready,
as a person finds an idle daemon; start=cold: the daemon keeps no standby, ADR 0049),
done_after_last_s from the last record's stamp to the run's ``ended_at``, eta_error is
|ETA - actual| / actual with actual = command to ``ended_at`` and the ETA the run was created with
(its card's: a queued run's counts its wait for the runs ahead). job_peak_mb is what the job itself
logs or reports about its memory (``unknown`` if it does not); job_rss_peak_mb is sampled here, twice a
second, as the summed RSS of the job's process session (driver JVM and Python workers).

``--max`` asks for the grammar's largest rate (``--max-tps``, the daemon's REPLAY_MAX_TPS raised to it):
the pacer never waits, so this is the product unthrottled. It then also prints

    e2e-max rate= bare= ratio= spark_sink=

rate: the product's records / broker span (first to last stamp); bare: the same for one
confluent-kafka loop re-sending the product's own records (bench/bare_loop.py); ratio = rate / bare;
spark_sink: Spark's ``df.write.format("kafka")`` on the same table, ``local[2]``, or ``unavailable
(why)`` (bench/spark_sink.py). Both get the producer settings the product's run had: its unthrottled
defaults and ``--producer``.

``--concurrent N`` asks for N replays at once (one plan, then N commands back to back), prints each
run's lines as above and then

    e2e-concurrent runs= tps= succeeded= p95_dev= max_second_ratio= queue_place= queued_s= overlap_s=
        each_p95_within_5pct=

queue_place: the largest place in line the run's answers showed (0: never shown in line); queued_s:
created to started, as the API answered; overlap_s: whole seconds in which two or more of the runs
had records landing on the broker.

``--formats parquet,iceberg,delta`` writes the table's rows also as an Iceberg and a Delta table (one
commit each, with the default EMR release's runtimes: scripts/lake-jars), replays the same window from
each through one daemon, prints each run's lines as above and then

    e2e-format format= rows= tps= plan_s= first_event_s= achieved= whole_run= span_ratio= snapshot=

plan_s: the `replay plan` command (from table metadata); whole_run: rows / (last - first stamp);
span_ratio: whole_run / T.

``--shaped SPEED`` writes one day of ``--rows`` events along a daily curve with bursts
(``scripts.devtools.sample_table --daily-curve``), asks ``replay plan <--window> tps=original
speed=SPEED max=<--tps>`` and runs it, then compares the broker's seconds with the run's own target
line (what the window's times put in each second under the ceiling, from the run's series):

    e2e-shaped speed= max= rows= plan_peak= plan_slid_s= plan_publish_s= seconds= correlation=
        within_5pct= max_second= max_second_ratio= first_event_s= eta_error=

correlation: Pearson's, broker count against target, per second; within_5pct: the share of seconds
whose count is within 5 % of its target (or one event of it, for targets under 20); max_second_ratio:
the busiest broker second over the ceiling.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: import bench, scripts

from bench import bare_loop, spark_sink
from bench.broker import (
    REPO,
    Record,
    create_topic,
    delete_topic,
    kafka,
    partition_count,
    read_back,
    timestamp_type,
)
from bench.daemon_harness import (
    REPLAY_CLI,
    Daemon,
    JobMemory,
    job_peak_mb,
    memory_mb,
    replay_cli,
    replayd,
    wait_for_standby,
)
from bench.seconds import Figures, per_second, span_rate, summary
from bench.throttle import sample_table
from bench.worker_profile import WorkerProfiler
from bench.worker_profile import summary as profile_summary
from daemon.contract.client import DaemonClient
from scripts.devtools.sample_table import write_sample_table
from scripts.lake_jars import ensure_lake_jars
from scripts.local_spark_cluster import start as start_cluster
from scripts.local_spark_cluster import stop as stop_cluster
from scripts.spark_kafka_jars import SparkKafkaJarsError, ensure_jars
from scripts.stray_jobs import interrupt_on_sigterm

WINDOW = "2024-01-01..2024-01-07"  # the whole sample table
GRAMMAR_MAX_TPS = 10_000_000


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


@dataclass
class Started:
    """One replay command under way: the CLI process following it and what the bench sampled."""

    cli: subprocess.Popen[str]
    sampler: JobMemory
    command: float
    eta_s: float
    rss_before: float
    first: dict[str, Any]  # the run as created (a queued run carries its place in line)
    profiler: WorkerProfiler | None = None


def start_run(daemon: Daemon, words: list[str], eta_s: float, profile: Path | None = None) -> Started:
    """`replay WORDS --follow --json`, returned as soon as the run exists; ``profile``: py-spy on its
    Python workers, the samples kept there."""
    before = memory_mb(daemon.pid)
    sampler = JobMemory(daemon.state_dir / "runs")
    command = time.time()
    cli = subprocess.Popen(
        [REPLAY_CLI, *words, "--follow", "--json"],
        cwd=REPO,
        env=daemon.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert cli.stdout is not None
    first = cli.stdout.readline()
    if not first.startswith("{"):
        cli.wait()
        raise SystemExit(f"replay {' '.join(words)}: {first}{cli.stderr.read() if cli.stderr else ''}")
    created = json.loads(first)
    sampler.watch(created["id"])
    profiler = WorkerProfiler(daemon.state_dir / "runs", profile) if profile is not None else None
    if profiler is not None:
        profiler.watch(created["id"])
    promised = float(created["eta_s"]) if created.get("eta_s") is not None else eta_s  # the card's ETA
    return Started(cli, sampler, command, promised, before["VmRSS"], created, profiler)


def finish_run(daemon: Daemon, started: Started) -> tuple[dict[str, Any], dict[str, float]]:
    """Wait for the run's final state; it as the API answered it, and the bench's timings."""
    rest, errors = started.cli.communicate()
    peak = started.sampler.stop()
    if started.profiler is not None:
        print("\n".join(profile_summary(started.profiler.stop())), flush=True)
    after = memory_mb(daemon.pid)
    answers = [json.loads(line) for line in rest.splitlines() if line.startswith("{")]
    if not answers:
        raise SystemExit(f"replay --follow ended without a final state: {errors.strip()[-2000:]}")
    answers.insert(0, started.first)
    places = [a["queue_position"] for a in answers if a.get("queue_position") is not None]
    timings = {
        "command": started.command,
        "eta_s": started.eta_s,
        "rss_before": started.rss_before,
        "rss_after": after["VmRSS"],
        "hwm_after": after["VmHWM"],
        "job_rss_peak": peak if peak is not None else float("nan"),
        "queue_place": float(max(places)) if places else 0.0,
    }
    return answers[-1], timings


def replay_words(
    tps: int, ordering: str, source: str = "orders", workers: int | None = None, delivery: str | None = None
) -> list[str]:
    slots = [f"workers={workers}"] if workers is not None else []
    sent = [f"delivery={delivery}"] if delivery is not None else []
    return [source, WINDOW, f"tps={tps}", f"ordering={ordering}", *slots, *sent]


def span_figures(stamps: list[int], tps: int) -> str:
    """``whole_run= span_ratio=``: rows over the first-to-last stamp span, and that over T."""
    span_s = (max(stamps) - min(stamps)) / 1000
    if not span_s:
        return "whole_run=nan span_ratio=nan"
    return f"whole_run={len(stamps) / span_s:.1f} span_ratio={len(stamps) / (tps * span_s):.3f}"


def run_once(
    daemon: Daemon,
    tps: int,
    ordering: str,
    source: str = "orders",
    workers: int | None = None,
    profile: Path | None = None,
    delivery: str | None = None,
) -> tuple[dict[str, Any], dict[str, float]]:
    """One replay through the CLI; the final run as the API answered it, and the bench's timings
    (`plan_s`: how long `replay plan` took, the CLI's start included)."""
    words = replay_words(tps, ordering, source, workers, delivery)
    asked = time.monotonic()
    plans, _ = replay_cli(daemon, "plan", *words)
    plan_s = time.monotonic() - asked
    run, timings = finish_run(daemon, start_run(daemon, words, float(plans[0]["eta_s"]), profile))
    return run, {**timings, "plan_s": plan_s}


def lake_copies(table: Path, directory: Path) -> tuple[dict[str, Path], list[Path]]:
    """The table's rows as an Iceberg and a Delta table (one commit each), and the jars that read them."""
    jars = ensure_lake_jars()
    submit = str(Path(sys.executable).with_name("spark-submit"))
    command = [
        submit,
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        "--jars",
        ",".join(map(str, jars)),
    ]
    script = REPO / "scripts" / "devtools" / "lake_tables.py"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        [*command, str(script), "copy", str(table), str(directory / "iceberg"), str(directory / "delta")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("LAKE_TABLES ")]
    if not lines:
        raise SystemExit(f"the lake copies were not written: {done.stderr.strip()[-2000:]}")
    seen = json.loads(lines[0].removeprefix("LAKE_TABLES "))
    return {name: Path(seen[name]["path"]) for name in ("iceberg", "delta")}, jars


def formats(bootstrap: str, directory: Path, table: Path, names: list[str], tps: int, ordering: str) -> int:
    """One replay of the same rows per table format, through one daemon; a line per format."""
    lake, jars = lake_copies(table, directory) if set(names) - {"parquet"} else ({}, [])
    state = directory / "state-formats"
    state.mkdir()
    failed = 0
    with replayd(state, bootstrap, table, lake=lake, jars=jars) as daemon:
        for name in names:
            source = "orders" if name == "parquet" else f"orders-{name}"
            run, timings = run_once(daemon, tps, ordering, source)
            if run["state"] != "succeeded":
                failed += 1
                print(
                    f"e2e-format format={name} run={run['id']} state={run['state']} "
                    f"reason={run.get('failure_reason')}"
                )
                continue
            try:
                stamps, _, whole = report_run(
                    bootstrap, daemon, run, timings, ordering=ordering, with_bytes=False
                )
            finally:
                delete_topic(bootstrap, run["topic"])
            print(
                f"e2e-format format={name} rows={len(stamps)} tps={tps} plan_s={timings['plan_s']:.2f} "
                f"first_event_s={min(stamps) / 1000 - timings['command']:.1f} achieved={whole.achieved:.1f} "
                f"{span_figures(stamps, tps)} snapshot={run.get('snapshot')} run={run['id']}",
                flush=True,
            )
    return failed


def chosen_customers(table: Path, share: float) -> tuple[list[str], int]:
    """Every n-th customer of the table (n = 1 / share), and how many rows they have."""
    column = ds.dataset(table, format="parquet", partitioning="hive").to_table(columns=["customer_id"])
    customers = sorted(set(column["customer_id"].to_pylist()))
    step = max(1, round(1 / share))
    chosen = customers[::step]
    rows = pc.sum(pc.is_in(column["customer_id"], pa.array(chosen)).cast(pa.int64())).as_py() or 0
    return chosen, int(rows)


def readable_rows(table: Path, column: str, values: list[str]) -> tuple[int, int, int]:
    """What a scan pushing ``column IN values`` down can skip, from the Parquet footers alone: the row
    groups whose min/max statistics admit one of the values must be read. (row groups, those, their rows)."""
    wanted = sorted(values)
    groups = readable = rows = 0
    for path in sorted(table.rglob("*.parquet")):
        metadata = pq.ParquetFile(path).metadata
        index = metadata.schema.names.index(column)
        for group in range(metadata.num_row_groups):
            groups += 1
            stats = metadata.row_group(group).column(index).statistics
            if stats is None or not stats.has_min_max:  # no statistics: the group is read
                readable += 1
                rows += metadata.row_group(group).num_rows
                continue
            position = bisect.bisect_left(wanted, stats.min)
            if position < len(wanted) and wanted[position] <= stats.max:
                readable += 1
                rows += metadata.row_group(group).num_rows
    return groups, readable, rows


def selective(bootstrap: str, directory: Path, table: Path, share: float, tps: int) -> int:
    """A replay of ``share`` of the window by customer (where=customer_id IN (...)), then the whole
    window unthrottled through the same daemon as the time-to-first-event reference; 1 on a failure."""
    chosen, expected = chosen_customers(table, share)
    groups, readable, read_rows = readable_rows(table, "customer_id", chosen)
    listed = ", ".join(f"'{customer}'" for customer in chosen)
    state = directory / "state-selective"
    state.mkdir()
    lines = []
    with replayd(state, bootstrap, table, max_tps=GRAMMAR_MAX_TPS) as daemon:
        for label, words in (
            ("selective", ["orders", WINDOW, f"tps={tps}", f"where=customer_id IN ({listed})"]),
            ("whole", ["orders", WINDOW, f"tps={GRAMMAR_MAX_TPS}"]),
        ):
            asked = time.monotonic()
            plans, _ = replay_cli(daemon, "plan", *words)
            plan_s = time.monotonic() - asked
            run, timings = finish_run(daemon, start_run(daemon, words, float(plans[0]["eta_s"])))
            if run["state"] != "succeeded":
                print(
                    f"e2e-selective {label} run={run['id']} state={run['state']} {run.get('failure_reason')}"
                )
                return 1
            try:
                stamps, _, _ = report_run(
                    bootstrap, daemon, run, timings, ordering="entity", with_bytes=False
                )
            finally:
                delete_topic(bootstrap, run["topic"])
            first = min(stamps) / 1000 - timings["command"]
            lines.append(
                f"e2e-selective run={label} rows={len(stamps)} planned={plans[0]['rows']} "
                f"expected={expected if label == 'selective' else 'all'} plan_s={plan_s:.2f} "
                f"first_event_s={first:.1f} {span_figures(stamps, int(run['tps']))} "
                f"row_groups={groups} row_groups_read={readable if label == 'selective' else groups} "
                f"rows_read_at_most={read_rows if label == 'selective' else 'all'} id={run['id']}"
            )
    for line in lines:
        print(line, flush=True)
    return 0


def shaped(bootstrap: str, directory: Path, speed: float, window: str, ceiling: int, rows: int) -> int:
    """One shaped replay of a day with a daily curve, against its own target line; 1 when it failed."""
    table = directory / "orders"
    write_sample_table(table, date(2024, 1, 1), 1, rows, seed=31, daily_curve=True)
    state = directory / "state-shaped"
    state.mkdir()
    words = ["orders", window, "tps=original", f"speed={speed:g}x", f"max={ceiling}"]
    with replayd(state, bootstrap, table) as daemon:
        plans, _ = replay_cli(daemon, "plan", *words)
        plan = plans[0]
        run, timings = finish_run(daemon, start_run(daemon, words, float(plan["eta_s"])))
        if run["state"] != "succeeded":
            print(f"e2e-shaped run={run['id']} state={run['state']} reason={run.get('failure_reason')}")
            return 1
        try:
            stamps = read_back(bootstrap, run["topic"]).stamps
        finally:
            delete_topic(bootstrap, run["topic"])
        with DaemonClient(base_url=daemon.url, token=daemon.env["REPLAY_API_TOKEN"]) as client:
            series = client.rate_series(daemon.env["REPLAY_USER"], run["id"])
    start_ms = int(series.start.timestamp()) * 1000
    counts = [0] * len(series.targets)
    for stamp in stamps:
        index = (stamp - start_ms) // 1000
        if 0 <= index < len(counts):
            counts[index] += 1
    targets = series.targets
    within = sum(
        1 for got, due in zip(counts, targets, strict=True) if abs(got - due) <= max(1.0, 0.05 * due)
    )
    busiest = max(per_second_window(stamps), default=0)
    actual = _stamp(run["ended_at"]) - timings["command"]
    print(
        f"e2e-shaped speed={speed:g} max={ceiling} rows={len(stamps)} plan_peak={plan.get('peak_tps')} "
        f"plan_slid_s={plan.get('slid_s')} plan_publish_s={plan.get('eta_publish_s', 0):.1f} "
        f"seconds={len(counts)} correlation={_correlation(counts, targets):.4f} "
        f"within_5pct={within / len(counts) if counts else float('nan'):.3f} max_second={busiest} "
        f"max_second_ratio={busiest / ceiling:.3f} "
        f"first_event_s={min(stamps) / 1000 - timings['command']:.1f} "
        f"eta_error={abs(timings['eta_s'] - actual) / actual:.3f} run={run['id']}",
        flush=True,
    )
    print(f"per_second={counts}")
    print(f"targets={[round(t) for t in targets]}")
    return 0


def per_second_window(stamps: list[int]) -> list[int]:
    """Records in the 1,000 ms starting at each record's stamp (every sliding second that starts at one)."""
    ordered = sorted(stamps)
    end, counts = 0, []
    for index, start in enumerate(ordered):
        while end < len(ordered) and ordered[end] - start < 1000:
            end += 1
        counts.append(end - index)
    return counts


def _correlation(a: list[int], b: list[float]) -> float:
    if len(a) < 2:
        return float("nan")
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - mean_a) * (y - mean_b) for x, y in zip(a, b, strict=True))
    spread = (sum((x - mean_a) ** 2 for x in a) * sum((y - mean_b) ** 2 for y in b)) ** 0.5
    return cov / spread if spread else float("nan")


PHASE = re.compile(r"phase=(\w+)(?: s=([0-9.]+))? t=([0-9.]+)")  # first_event has no s=


def phases(run_dir: Path, first_event_s: float) -> str:
    """Where the time to the first event went: the daemon's part, then each job phase's seconds.

    The job logs ``phase=<name> s=<seconds> t=<since spark-submit started>``; ``daemon`` is the rest
    of the command-to-first-event time (CLI, plan, topic, launch, the watcher's tick), and
    ``jvm_to_python`` is spark-submit's JVM start until the driver's Python began.
    """
    found = [
        hit
        for name in ("stdout.log", "stderr.log")
        if (run_dir / name).exists()
        for hit in PHASE.findall((run_dir / name).read_text(errors="replace"))
    ]
    if not found:
        return "phases=unknown"
    first = next((float(t) for name, _, t in found if name == "first_event"), None)
    daemon = "unknown" if first is None else f"{first_event_s - first:.1f}"
    steps = " ".join(f"{name}={float(s):.1f}" for name, s, _ in found if name != "first_event")
    _, took, at = found[0]  # the first phase starts when the driver's Python does
    return f"phases daemon={daemon} jvm_to_python={float(at) - float(took or 0):.1f} {steps}"


RECONCILE = re.compile(r"reconcile read (\d+) rows from \S+ in ([0-9.]+) s, compared in ([0-9.]+) s")


ON_DRIVER = re.compile(r"reconcile: (\d+) selected ids collected in ([0-9.]+) s, the topic (followed|read)")
TAIL = re.compile(r"reconcile: the follower read the tail in ([0-9.]+) s")
COMPARED = re.compile(r"reconcile: compared on the driver in ([0-9.]+) s")


def reconcile_split(run_dir: Path) -> str:
    """The end-of-run reconcile's parts as the job logs them: in Spark (a big run) the read back and
    the comparison; on the driver the selected ids' collection, the follower's tail, the comparison."""
    text = "".join(
        (run_dir / name).read_text(errors="replace")
        for name in ("stdout.log", "stderr.log")
        if (run_dir / name).exists()
    )
    found = RECONCILE.search(text)
    if found is not None:
        rows, read_s, compare_s = found.groups()
        return f"reconcile read_rows={rows} read_s={read_s} compare_s={compare_s}"
    driver = ON_DRIVER.search(text)
    if driver is None:
        return "reconcile split=unknown (not logged)"
    ids, collect_s, topic = driver.groups()
    tail, compared = TAIL.search(text), COMPARED.search(text)
    tail_s = tail.group(1) if tail is not None else "unknown"
    compare_s = compared.group(1) if compared is not None else "unknown"
    parts = f"ids={ids} collect_s={collect_s} topic={topic} tail_s={tail_s} compare_s={compare_s}"
    return f"reconcile on_driver {parts}"


def starts(result: Path) -> str:
    """How late the job's tasks started against their schedule (the job's own figures, not truth)."""
    try:
        document = json.loads(result.read_text())
    except (OSError, ValueError):
        return "starts=unknown"
    late, spread = document.get("late_start_s"), document.get("start_spread_s")
    return f"starts late_start_s={late} start_spread_s={spread}"


def report_run(
    bootstrap: str,
    daemon: Daemon,
    run: dict[str, Any],
    timings: dict[str, float],
    *,
    ordering: str,
    with_bytes: bool,
    workers: int | None = None,
    start: str = "warm",
) -> tuple[list[int], list[Record], Figures]:
    """Print the run's lines from its topic's broker stamps; its stamps (records when asked), figures."""
    topic = run["topic"]
    stamp_type = timestamp_type(bootstrap, topic)
    back = read_back(bootstrap, topic, with_bytes=with_bytes)
    stamps, tps = back.stamps, int(run["tps"])
    seconds = per_second(stamps, tps)
    whole, full = summary(seconds, tps)
    command, ended = timings["command"], _stamp(run["ended_at"])
    actual = ended - command
    first_event = min(stamps) / 1000 - command
    done_after_last = ended - max(stamps) / 1000
    eta_error = abs(timings["eta_s"] - actual) / actual
    print(
        f"run={run['id']} state={run['state']} topic={topic} stamps={stamp_type} "
        f"confirmed={run['confirmed']} read_back={len(stamps)} job_tps={run['achieved_tps']} "
        f"behind_schedule_s={run.get('behind_schedule_s')} skew={run.get('partition_skew')}"
    )
    if stamp_type != "LogAppendTime":
        print(f"note: the topic stamps {stamp_type}: the figures below are on the producers' clock")
    if len(seconds) <= 120:
        print(f"per_second={seconds}")
    print(
        f"plan_eta_s={timings['eta_s']:.1f} actual_s={actual:.1f} "
        f"daemon_hwm_mb={timings['hwm_after']:.0f} seconds_trimmed={whole.seconds}"
    )
    print(phases(daemon.state_dir / "runs" / run["id"], first_event))
    print(reconcile_split(daemon.state_dir / "runs" / run["id"]))
    print(starts(daemon.state_dir / "runs" / run["id"] / "result.json"))
    print(f"e2e-all-seconds seconds={full.seconds} {full.line()}")
    print(
        f"e2e rows={len(stamps)} tps={tps} {whole.line()} {span_figures(stamps, tps)} "
        f"first_event_s={first_event:.1f} "
        f"done_after_last_s={done_after_last:.1f} eta_error={eta_error:.3f} "
        f"daemon_rss_mb_before={timings['rss_before']:.0f} daemon_rss_mb_after={timings['rss_after']:.0f} "
        f"job_peak_mb={job_peak_mb(daemon.state_dir / 'runs' / run['id'])} "
        f"job_rss_peak_mb={timings['job_rss_peak']:.0f} ordering={ordering} "
        f"workers={workers or 'default'} start={start} run={run['id']}",
        flush=True,
    )
    return stamps, back.records, whole


def bare_rate(bootstrap: str, records: list[Record], partitions: int, tuning: dict[str, int | str]) -> float:
    target = create_topic(bootstrap, "bench-bare", partitions, {"message.timestamp.type": "LogAppendTime"})
    try:
        bare_loop.send_all(bootstrap, target, records, tuning)
        return span_rate(read_back(bootstrap, target).stamps)
    finally:
        delete_topic(bootstrap, target)


def spark_sink_figure(
    bootstrap: str, table: Path, records: list[Record], partitions: int, tuning: dict[str, int | str]
) -> str:
    """Spark's own sink on the same table, as ``<rate>`` or ``unavailable (<why>)``."""
    try:
        connector = ensure_jars()
    except SparkKafkaJarsError as exc:
        return f"unavailable ({exc})"
    headers = {
        key: value.decode()
        for key, value in (records[0].headers if records else [])
        if key != "replay-event-id"
    }
    target = create_topic(bootstrap, "bench-sink", partitions, {"message.timestamp.type": "LogAppendTime"})
    try:
        started = spark_sink.submit(connector.jars, table, target, bootstrap, headers, tuning)
        back = read_back(bootstrap, target, with_bytes=True)
    except RuntimeError as exc:
        return f"unavailable ({str(exc)[:300]})"
    finally:
        delete_topic(bootstrap, target)
    rate = span_rate(back.stamps)
    size = sum(len(r.value or b"") for r in back.records) / max(1, len(back.records))
    print(
        f"spark_sink connector={connector.version} pyspark={connector.spark_version} rows={len(back.stamps)} "
        f"rate={rate:.0f} first_event_s={min(back.stamps) / 1000 - started:.1f} value_bytes={size:.0f}"
    )
    return f"{rate:.0f}"


def unthrottled(
    bootstrap: str,
    table: Path,
    stamps: list[int],
    records: list[Record],
    partitions: int,
    skip_sink: bool,
    tuning: dict[str, int | str],
) -> None:
    """The product's span rate against the bare loop and Spark's sink, on topics of as many partitions,
    both with the producer settings the product's run had."""
    rate = span_rate(stamps)
    bare = bare_rate(bootstrap, records, partitions, tuning)
    size = sum(len(r.value or b"") for r in records) / max(1, len(records))
    print(f"bare rows={len(records)} rate={bare:.0f} value_bytes={size:.0f} partitions={partitions}")
    sink = (
        "unavailable (--no-spark-sink)"
        if skip_sink
        else spark_sink_figure(bootstrap, table, records, partitions, tuning)
    )
    print(f"e2e-max rate={rate:.0f} bare={bare:.0f} ratio={rate / bare:.3f} spark_sink={sink}", flush=True)


def overlap_seconds(spans: list[tuple[int, int]]) -> int:
    """Whole seconds in which two or more runs were publishing (spans: first and last stamp, ms)."""
    if not spans:
        return 0
    start, end = min(a for a, _ in spans) // 1000, max(b for _, b in spans) // 1000
    return sum(
        1 for second in range(start, end + 1) if sum(a // 1000 <= second <= b // 1000 for a, b in spans) > 1
    )


def concurrent(bootstrap: str, daemon: Daemon, count: int, tps: int, ordering: str) -> int:
    """COUNT replays asked for at once: each one's figures, then whether they shared the machine.

    The local launcher admits as many jobs as it can pace (REPLAY_LOCAL_MAX_CONCURRENT_RUNS) and
    queues the rest, so either every run holds its rate while they overlap or they take turns.
    """
    words = replay_words(tps, ordering)
    eta_s = float(replay_cli(daemon, "plan", *words)[0][0]["eta_s"])
    started = [start_run(daemon, words, eta_s) for _ in range(count)]
    finished = [finish_run(daemon, one) for one in started]
    failed, spans, lines = 0, [], []
    try:
        for run, timings in finished:
            if run["state"] != "succeeded":
                failed += 1
                print(f"e2e run={run['id']} state={run['state']} reason={run.get('failure_reason')}")
                continue
            stamps, _, whole = report_run(
                bootstrap, daemon, run, timings, ordering=ordering, with_bytes=False
            )
            spans.append((min(stamps), max(stamps)))
            queued = _stamp(run["started_at"]) - _stamp(run["created_at"]) if run.get("started_at") else None
            lines.append((whole, timings["queue_place"], queued))
    finally:
        for run, _ in finished:
            delete_topic(bootstrap, run["topic"])
    held = all(whole.p95_dev <= 0.05 for whole, _, _ in lines)
    print(
        f"e2e-concurrent runs={count} tps={tps} succeeded={len(lines)} "
        f"p95_dev={','.join(f'{w.p95_dev:.4f}' for w, _, _ in lines)} "
        f"max_second_ratio={','.join(f'{w.max_second_ratio:.4f}' for w, _, _ in lines)} "
        f"queue_place={','.join(f'{p:.0f}' for _, p, _ in lines)} "
        f"queued_s={','.join('unknown' if q is None else f'{q:.1f}' for _, _, q in lines)} "
        f"overlap_s={overlap_seconds(spans)} each_p95_within_5pct={'yes' if held else 'no'}",
        flush=True,
    )
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description="End to end through replayd and the replay CLI.")
    parser.add_argument("--rows", type=int, help="rows in the table (default 15000; 1000000 with --max)")
    parser.add_argument("--tps", type=int, default=1000)
    parser.add_argument("--ordering", choices=["entity", "none"], default="entity")
    parser.add_argument("--runs", type=int, default=1, help="repeat, one line per run (one daemon)")
    parser.add_argument("--workers", type=int, help="the runs' workers= (slots); default: the daemon's")
    parser.add_argument(
        "--concurrent", type=int, default=0, metavar="N", help="N replays asked for at once (admission)"
    )
    parser.add_argument(
        "--max", action="store_true", help="unthrottled, against a bare loop and Spark's sink"
    )
    parser.add_argument("--max-tps", type=int, default=GRAMMAR_MAX_TPS, help="the rate --max asks for")
    parser.add_argument("--no-spark-sink", action="store_true", help="--max without Spark's sink line")
    parser.add_argument("--producer", metavar="JSON", help="the daemon's REPLAY_KAFKA_PRODUCER (tuning)")
    parser.add_argument(
        "--profile", type=Path, metavar="DIR", help="py-spy on the job's workers (bench/worker_profile.py)"
    )
    parser.add_argument("--bootstrap", help="HOST:PORT of a running broker (default: start one)")
    parser.add_argument(
        "--delivery",
        choices=["idempotent", "transactional"],
        help="the runs' delivery= (default: the source's)",
    )
    parser.add_argument(
        "--launcher",
        choices=["local", "spark"],
        default="local",
        help="spark: a loopback standalone cluster of two one-core workers (scripts/local-spark-cluster)",
    )
    parser.add_argument("--shaped", type=float, metavar="SPEED", help="tps=original speed=SPEED, max=--tps")
    parser.add_argument("--window", default="2024-01-01T08:00..2024-01-01T10:00", help="with --shaped")
    parser.add_argument(
        "--selective",
        type=float,
        metavar="SHARE",
        help="where= keeping SHARE (0.01) of the window by customer, beside the whole window unthrottled",
    )
    parser.add_argument(
        "--formats",
        help="comma-separated of parquet, iceberg, delta: the same rows replayed from each table format",
    )
    parser.add_argument(
        "--start",
        choices=["warm", "cold", "both"],
        default="warm",
        help="warm: each command finds a ready standby driver (an idle daemon's default); cold: the "
        "daemon keeps none; both: a warm and a cold run in turn, one daemon each",
    )
    args = parser.parse_args()
    if args.concurrent < 0 or (args.concurrent and (args.max or args.runs != 1)):
        parser.error("--concurrent takes N >= 1 and goes without --max and --runs")
    rows = args.rows or (1_000_000 if args.max else 15_000)
    tps = args.max_tps if args.max else args.tps
    failed = 0
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as scratch, kafka(args.bootstrap) as bootstrap:
        directory = Path(scratch)
        if args.shaped:
            return 1 if shaped(bootstrap, directory, args.shaped, args.window, tps, rows) else 0
        table = sample_table(directory, rows)
        if args.selective:
            return selective(bootstrap, directory, table, args.selective, tps)
        if args.formats:
            names = [name for name in args.formats.split(",") if name]
            if not names or set(names) - {"parquet", "iceberg", "delta"}:
                parser.error("--formats takes parquet, iceberg and/or delta")
            return 1 if formats(bootstrap, directory, table, names, tps, args.ordering) else 0
        starts = ["warm", "cold"] if args.start == "both" else [args.start]
        if args.launcher == "spark":
            starts = ["cold"]  # the cluster launcher keeps no standby driver
        with contextlib.ExitStack() as daemons:
            extra = daemons.enter_context(spark_cluster(directory)) if args.launcher == "spark" else None
            started = {
                start: daemons.enter_context(
                    replayd(
                        _state(directory, start),
                        bootstrap,
                        table,
                        max_tps=tps if args.max else None,
                        standby=start == "warm",
                        producer=args.producer,
                        extra=extra,
                    )
                )
                for start in starts
            }
            if args.concurrent:
                daemon = started[starts[0]]
                return 1 if concurrent(bootstrap, daemon, args.concurrent, tps, args.ordering) else 0
            for _ in range(args.runs):
                for start, daemon in started.items():
                    if start == "cold" and "warm" in started:  # its standby idle, not starting beside
                        wait_for_standby(started["warm"])
                    failed += not one_run(daemon, bootstrap, table, args, tps, start)
    return 1 if failed else 0


@contextlib.contextmanager
def spark_cluster(directory: Path) -> Iterator[dict[str, str]]:
    """A loopback standalone cluster (two one-core workers) for the block; the daemon's settings for
    its launcher. Started and stopped with the script people run by hand."""
    state_dir = directory / "spark-cluster"
    cluster = start_cluster(state_dir, workers=2, cores=1)
    try:
        yield {
            "REPLAY_LAUNCHER": "spark",
            "REPLAY_SPARK_MASTER": cluster.master,
            "REPLAY_SPARK_EXECUTOR_MEMORY": "1g",
            "REPLAY_SPARK_EXECUTOR_WAIT_S": "120",
        }
    finally:
        stop_cluster(state_dir)


def _state(directory: Path, start: str) -> Path:
    state = directory / f"state-{start}"
    state.mkdir()
    return state


def one_run(
    daemon: Daemon, bootstrap: str, table: Path, args: argparse.Namespace, tps: int, start: str
) -> bool:
    """One replay of the main bench and its lines; a warm one waits for a ready standby first."""
    if start == "warm":
        waited_s, rss_mb = wait_for_standby(daemon)
        print(f"standby waited_s={waited_s:.1f} idle_rss_mb={rss_mb:.0f}")
    run, timings = run_once(
        daemon, tps, args.ordering, workers=args.workers, profile=args.profile, delivery=args.delivery
    )
    if run["state"] != "succeeded":
        print(f"e2e run={run['id']} state={run['state']} reason={run.get('failure_reason')}")
        return False
    try:
        stamps, records, _ = report_run(
            bootstrap,
            daemon,
            run,
            timings,
            ordering=args.ordering,
            with_bytes=args.max,
            workers=args.workers,
            start=start,
        )
        if args.max:
            partitions = partition_count(bootstrap, run["topic"])
            tuning = json.loads(args.producer) if args.producer else {}
            unthrottled(bootstrap, table, stamps, records, partitions, args.no_spark_sink, tuning)
    finally:
        delete_topic(bootstrap, run["topic"])
    return True


if __name__ == "__main__":
    interrupt_on_sigterm()  # a SIGTERM still stops the broker and daemons this run started
    raise SystemExit(main())
