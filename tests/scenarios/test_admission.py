"""Admission control, the learned ETA and a prompt final state, against a real daemon and local Spark.

The daemon runs one job at a time (`REPLAY_LOCAL_MAX_CONCURRENT_RUNS=1`): a second replay waits in
`queued`, showing its place in line, and starts only once the first has ended; a queued run cancelled
never launches. The finished runs then teach the plan its start-up.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from daemon.contract.models import ReplayBody
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon
from tests.fixtures.runs import TERMINAL, daemon_store, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

BODY = ReplayBody(source="orders", window="2024-01-02..2024-01-03", tps=300)  # 600 rows, ~2 s each


@pytest.fixture(scope="module")
def one_slot(
    tmp_path_factory: pytest.TempPathFactory, sample_table: Path, kafka_bootstrap: str
) -> Iterator[DaemonProcess]:
    daemon = running_daemon(
        tmp_path_factory.mktemp("one-slot"),
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        # cold starts only: every run here starts alike, so the learned start-up is one kind's
        # (warm and cold are learned apart: tests/store/test_run_queue.py, scenarios/test_standby_e2e.py)
        extra={"REPLAY_LOCAL_MAX_CONCURRENT_RUNS": "1", "REPLAY_LOCAL_STANDBY": "false"},
    )
    try:
        yield daemon
    finally:
        daemon.stop()


def _places_while_queued(daemon: DaemonProcess, run_id: str, timeout_s: float = 240.0) -> list[int | None]:
    """The run's `queue_position` at every look while it is queued."""
    client, seen = daemon.client(), list[int | None]()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = client.get_replay(OWNER, run_id)
        if run.state != "queued":
            return seen
        seen.append(run.queue_position)
        time.sleep(0.2)
    raise AssertionError(f"{run_id} stayed queued")


def _log_events(daemon: DaemonProcess, event: str, run_id: str) -> list[dict[str, Any]]:
    lines = (json.loads(line) for line in daemon.log_text().splitlines() if line.startswith("{"))
    return [e for e in lines if e.get("event") == event and e.get("run_id") == run_id]


def test_with_one_slot_two_replays_run_one_after_the_other(one_slot: DaemonProcess) -> None:
    client = one_slot.client()
    first = client.create_replay(OWNER, BODY)
    assert first.state == "queued" and first.queue_position is None  # the free slot takes it: no line
    planned = client.plan(OWNER, BODY)  # the one slot is taken (or about to be): the ETA waits for it
    second = client.create_replay(OWNER, BODY)

    assert planned.runs_ahead == 1 and planned.eta_queue_s > 0
    parts = (planned.eta_queue_s, planned.eta_startup_s, planned.eta_publish_s, planned.eta_finish_s)
    assert planned.eta_s == pytest.approx(sum(part or 0.0 for part in parts))
    assert first.eta_s is not None and second.eta_s is not None and second.eta_s > first.eta_s
    places = _places_while_queued(one_slot, second.id)
    done = [wait_for(client, run.id, TERMINAL) for run in (first, second)]

    assert [run.state for run in done] == ["succeeded", "succeeded"], done
    # next in line while the first one ran; no place once its slot was free (the watcher's next look)
    waited = [place for place in places if place is not None]
    assert waited and waited[-1] == 1, places
    assert all(place == 1 for place in waited), places  # nothing else waits: 1st from the start
    assert done[0].ended_at is not None and done[1].started_at is not None
    assert done[1].started_at >= done[0].ended_at
    announced = _log_events(one_slot, "notify run started", second.id)
    assert [(e["state"], e["queue_position"]) for e in announced] == [("queued", 1)]


def test_a_queued_run_cancelled_never_launches(one_slot: DaemonProcess) -> None:
    client = one_slot.client()
    running = client.create_replay(OWNER, BODY)
    waiting = client.create_replay(OWNER, BODY)
    wait_for(client, running.id, {"submitted", "running"} | TERMINAL)

    client.cancel_replay(OWNER, waiting.id)
    cancelled = wait_for(client, waiting.id, TERMINAL)
    finished = wait_for(client, running.id, TERMINAL)

    with daemon_store(one_slot) as store:
        handle = store.runs.get(waiting.id).launcher_handle
    assert (cancelled.state, cancelled.queue_position, handle) == ("cancelled", None, None)
    assert not (one_slot.state_dir / "runs" / waiting.id).exists()
    assert finished.state == "succeeded"


def test_the_final_state_follows_the_jobs_result_line_within_a_second(one_slot: DaemonProcess) -> None:
    run = one_slot.client().create_replay(OWNER, BODY)
    wait_for(one_slot.client(), run.id, TERMINAL)

    stdout = one_slot.state_dir / "runs" / run.id / "stdout.log"
    printed = datetime.fromtimestamp(stdout.stat().st_mtime, UTC)  # the result line is its last write
    with daemon_store(one_slot) as store:
        stored = store.runs.get(run.id)
    assert stored.state == "succeeded"
    assert stored.ended_at is not None and stored.last_delivery_at is not None
    # the watcher polls every second; the launcher wakes it as soon as the line is printed
    assert (stored.ended_at - printed).total_seconds() <= 1.0
    assert stored.ended_at >= stored.last_delivery_at


def test_the_plan_learns_its_start_up_from_the_finished_runs(one_slot: DaemonProcess) -> None:
    with daemon_store(one_slot) as store:
        timings = store.runs.launch_timings("local", 10)
    assert timings, "the runs above report their delivery span"

    plan = one_slot.client().plan(OWNER, BODY)

    assert plan.eta_startup_s == pytest.approx(statistics.median(t.startup_s for t in timings))
    assert plan.eta_finish_s == pytest.approx(statistics.median(t.finish_s for t in timings))
    assert plan.eta_publish_s == pytest.approx(plan.rows / 300)
    parts = (plan.eta_startup_s, plan.eta_publish_s, plan.eta_finish_s)
    assert plan.eta_s == pytest.approx(sum(part or 0.0 for part in parts))
