"""The launch queue, admission and launcher timings on both dialects: what the watcher and the ETA read."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from daemon.core.run_options import RunOptions
from daemon.core.states import RunState
from daemon.usecases.eta import DEFAULT_FINISH_S, DEFAULT_STARTUP_S, WARM_STARTUP_S, estimate, waiting
from store import Store
from store.migrate import upgrade
from store.models import Run
from store.run_queue import ADMISSION_LOCK

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def _run(store: Store, **overrides: Any) -> Run:
    fields: dict[str, Any] = {"kind": "replay", "source": "orders", "topic": "t", "tps": 100}
    return store.runs.create(**{**fields, "requester": "U1", **overrides})


def _finished(
    store: Store,
    *,
    startup_s: float,
    publish_s: float,
    finish_s: float,
    kind: str = "local",
    standby: bool = False,
) -> Run:
    """A succeeded run whose delivery span says how long it took to start and to wind down (on a
    standby driver when `standby`, as the local launcher's handle then says)."""
    run = _run(store)
    submitted = store.now()
    first = submitted + timedelta(seconds=startup_s)
    last = first + timedelta(seconds=publish_s)
    handle = {"pid": 1, "standby": True, "warm": True} if standby else {"pid": 1}
    store.runs.transition(
        run.id, RunState.SUBMITTED, launcher_kind=kind, launcher_handle=handle, submitted_at=submitted
    )
    store.runs.transition(run.id, RunState.RUNNING, started_at=submitted)
    return store.runs.transition(
        run.id,
        RunState.SUCCEEDED,
        first_delivery_at=first,
        last_delivery_at=last,
        ended_at=last + timedelta(seconds=finish_s),
    )


def test_queued_runs_are_in_line_in_creation_order(database_url: str) -> None:
    ticks = iter(T0 + timedelta(seconds=i) for i in range(100))
    with Store(database_url, clock=lambda: next(ticks)) as store:
        upgrade(store.engine)
        first, second, third = (_run(store) for _ in range(3))
        store.runs.transition(first.id, RunState.SUBMITTED, launcher_kind="local", launcher_handle={"pid": 1})
        store.runs.transition(third.id, RunState.CANCELLING)  # a queued run cancelled: out of line

        holding, waiting = store.runs.line()
        assert [run.id for run in waiting] == [second.id]
        assert [run.id for run in holding] == [first.id]
        assert store.runs.jobs_in_flight() == 1


def test_a_cancelling_run_without_a_job_holds_no_slot(database_url: str) -> None:
    with Store(database_url) as store:
        upgrade(store.engine)
        waiting, launched = _run(store), _run(store)
        store.runs.transition(waiting.id, RunState.CANCELLING)
        store.runs.transition(
            launched.id, RunState.SUBMITTED, launcher_kind="local", launcher_handle={"pid": 1}
        )
        store.runs.transition(launched.id, RunState.CANCELLING)

        assert store.runs.jobs_in_flight() == 1


def test_launch_timings_are_the_latest_succeeded_runs_of_that_launcher(database_url: str) -> None:
    ticks = iter(T0 + timedelta(seconds=10 * i) for i in range(100))
    with Store(database_url, clock=lambda: next(ticks)) as store:
        upgrade(store.engine)
        _finished(store, startup_s=30, publish_s=5, finish_s=4)
        _finished(store, startup_s=12, publish_s=5, finish_s=1.5)
        _finished(store, startup_s=14, publish_s=5, finish_s=0.5)
        _finished(store, startup_s=99, publish_s=5, finish_s=9, kind="emr")

        timings = store.runs.launch_timings("local", 2)

    assert [(t.startup_s, t.finish_s) for t in timings] == [(14.0, 0.5), (12.0, 1.5)]


def test_launch_timings_of_warm_or_of_cold_starts_only(database_url: str) -> None:
    ticks = iter(T0 + timedelta(seconds=10 * i) for i in range(100))
    with Store(database_url, clock=lambda: next(ticks)) as store:
        upgrade(store.engine)
        _finished(store, startup_s=15, publish_s=5, finish_s=1)
        _finished(store, startup_s=3.5, publish_s=5, finish_s=1, standby=True)
        _finished(store, startup_s=16, publish_s=5, finish_s=1)
        _finished(store, startup_s=3.0, publish_s=5, finish_s=1, standby=True)

        warm = store.runs.launch_timings("local", 10, warm=True)
        cold = store.runs.launch_timings("local", 1, warm=False)
        either = store.runs.launch_timings("local", 10)

    assert [t.startup_s for t in warm] == [3.0, 3.5]
    assert [t.startup_s for t in cold] == [16.0]
    assert len(either) == 4


def test_a_warm_start_is_estimated_from_warm_runs_and_its_own_default(database_url: str) -> None:
    ticks = iter(T0 + timedelta(seconds=10 * i) for i in range(100))
    with Store(database_url, clock=lambda: next(ticks)) as store:
        upgrade(store.engine)
        unlearned = estimate(store, launcher_kind="local", rows=2_000, tps=1_000, warm=True)
        _finished(store, startup_s=16, publish_s=5, finish_s=1)
        _finished(store, startup_s=3.5, publish_s=5, finish_s=1, standby=True)

        warm = estimate(store, launcher_kind="local", rows=2_000, tps=1_000, warm=True)
        cold = estimate(store, launcher_kind="local", rows=2_000, tps=1_000, warm=False)

    assert (unlearned.startup_s, unlearned.learned_from, unlearned.warm) == (WARM_STARTUP_S["local"], 0, True)
    assert (warm.startup_s, warm.learned_from) == (3.5, 1)
    assert (cold.startup_s, cold.learned_from, cold.warm) == (16.0, 1, False)


def test_a_run_on_a_started_emr_application_is_estimated_without_the_applications_start(
    database_url: str,
) -> None:
    with Store(database_url) as store:
        upgrade(store.engine)
        warm = estimate(store, launcher_kind="emr", rows=2_000, tps=1_000, warm=True)
        cold = estimate(store, launcher_kind="emr", rows=2_000, tps=1_000, warm=False)
    assert (warm.startup_s, cold.startup_s) == (WARM_STARTUP_S["emr"], DEFAULT_STARTUP_S["emr"])
    assert warm.startup_s < cold.startup_s


def test_eta_learns_start_up_from_recent_runs_by_their_median(database_url: str) -> None:
    ticks = iter(T0 + timedelta(seconds=10 * i) for i in range(100))
    with Store(database_url, clock=lambda: next(ticks)) as store:
        upgrade(store.engine)
        for startup in (11.0, 13.0, 60.0):  # one slow start must not move the estimate much
            _finished(store, startup_s=startup, publish_s=5, finish_s=1.0)

        eta = estimate(store, launcher_kind="local", rows=10_500, tps=2_000)

    assert (eta.startup_s, eta.publish_s, eta.finish_s, eta.learned_from) == (13.0, 5.25, 1.0, 3)
    assert eta.total_s == 19.25


def test_eta_without_history_uses_the_launchers_documented_default(database_url: str) -> None:
    with Store(database_url) as store:
        upgrade(store.engine)
        local = estimate(store, launcher_kind="local", rows=1_000, tps=100)
        emr = estimate(store, launcher_kind="emr", rows=1_000, tps=100)
        fixed = estimate(store, launcher_kind="emr", rows=1_000, tps=100, startup_default_s=30.0)

    assert (local.startup_s, local.finish_s, local.learned_from) == (
        DEFAULT_STARTUP_S["local"],
        DEFAULT_FINISH_S["local"],
        0,
    )
    assert (emr.startup_s, emr.publish_s) == (DEFAULT_STARTUP_S["emr"], 10.0)
    assert fixed.startup_s == 30.0


def test_the_eta_of_a_run_asked_for_now_waits_for_the_runs_ahead_of_it(database_url: str) -> None:
    """One run half sent, one still starting, one queued: a new run waits on the slots they free."""
    now, ticks = T0 + timedelta(seconds=50), iter(T0 + timedelta(seconds=i) for i in range(40))
    with Store(database_url, clock=lambda: next(ticks)) as store:
        upgrade(store.engine)
        half, starting, _ = (
            _run(store, options=RunOptions(planned_rows=rows)) for rows in (1_000, 1_000, 2_000)
        )
        for run in (half, starting):
            assert store.runs.admit(run.id, cap=2)
        store.runs.transition(
            half.id, RunState.SUBMITTED, launcher_kind="local", launcher_handle={}, submitted_at=T0
        )
        store.runs.transition(half.id, RunState.RUNNING, started_at=T0, first_delivery_at=T0, confirmed=500)
        store.runs.transition(
            starting.id,
            RunState.SUBMITTED,
            launcher_kind="local",
            launcher_handle={},
            submitted_at=now - timedelta(seconds=5),
        )
        alone = estimate(store, launcher_kind="local", rows=600, tps=100)  # defaults: 20 s up, 3 s down

        # left: 500 rows at 100/s + 3 = 8 s; 15 s of start-up + 10 + 3 = 28 s; the queued one 20 + 20 + 3
        two = waiting(store, alone, capacity=2, now=now)
        one = waiting(store, alone, capacity=1, now=now)
        free = waiting(store, alone, capacity=4, now=now)

    assert (two.queue_s, two.ahead, two.total_s) == (28.0, 3, 28.0 + alone.total_s)
    assert two.service_s == alone.service_s  # the execution limit counts the job, not the wait
    assert (one.queue_s, one.ahead) == (28.0 + 43.0, 3)
    assert free == alone and free.queue_s == 0


def test_a_slot_is_claimed_oldest_first_up_to_the_cap_and_freed_when_its_run_ends(database_url: str) -> None:
    ticks = iter(T0 + timedelta(seconds=i) for i in range(100))
    with Store(database_url, clock=lambda: next(ticks)) as store:
        upgrade(store.engine)
        first, second, third = (_run(store) for _ in range(3))

        assert not store.runs.admit(second.id, cap=2)  # the first in line goes first
        assert store.runs.admit(first.id, cap=2)
        assert store.runs.admit(first.id, cap=2)  # asked again (after a restart): still its own
        assert store.runs.admit(second.id, cap=2)
        assert not store.runs.admit(third.id, cap=2)  # both slots held
        assert store.runs.jobs_in_flight() == 2

        store.runs.transition(first.id, RunState.CANCELLING)  # admitted, cancelled: holds it until it ends
        assert not store.runs.admit(third.id, cap=2)
        store.runs.transition(first.id, RunState.CANCELLED)
        assert store.runs.admit(third.id, cap=2)
        assert not store.runs.admit(first.id, cap=2)  # no longer queued
        assert store.runs.jobs_in_flight() == 2


def test_no_cap_admits_in_line_order_only(database_url: str) -> None:
    with Store(database_url) as store:
        upgrade(store.engine)
        runs = [_run(store) for _ in range(3)]
        assert [store.runs.admit(run.id, cap=None) for run in runs] == [True, True, True]


def test_an_admission_waits_for_another_daemons_admission_in_flight(database_url: str) -> None:
    """The count of slots held and the claim are one transaction: one daemon's admission holding
    the admission lock (PostgreSQL) or the write lock (SQLite) makes another's wait, not overlap."""
    with Store(database_url) as store, Store(database_url) as other:
        upgrade(store.engine)
        run = _run(store)
        taken, release = threading.Event(), threading.Event()

        def hold() -> None:
            with other.session() as session:
                if other.dialect == "postgresql":
                    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADMISSION_LOCK})
                else:  # BEGIN IMMEDIATE took the write lock; make it so with a write
                    session.execute(text("UPDATE runs SET tps = tps WHERE id = :id"), {"id": run.id})
                taken.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        assert taken.wait(10)
        threading.Timer(1.0, release.set).start()
        started = time.monotonic()
        admitted = store.runs.admit(run.id, cap=1)
        waited = time.monotonic() - started
        holder.join(10)

    assert admitted and waited >= 0.9, waited


def test_a_ramped_run_is_estimated_and_waited_for_with_the_time_its_ramp_holds_back(
    database_url: str,
) -> None:
    """3,000 rows at 100/s: 30 s flat; a 20 s ramp from a tenth sends 11 s worth in its 20 s, so 39 s."""
    now, ticks = T0 + timedelta(seconds=50), iter(T0 + timedelta(seconds=i) for i in range(40))
    with Store(database_url, clock=lambda: next(ticks)) as store:
        upgrade(store.engine)
        ramped = estimate(store, launcher_kind="local", rows=3_000, tps=100, ramp_s=20)
        flat = estimate(store, launcher_kind="local", rows=3_000, tps=100)
        ahead = _run(store, options=RunOptions(planned_rows=3_000, ramp_s=20))
        assert store.runs.admit(ahead.id, cap=1)
        store.runs.transition(
            ahead.id, RunState.SUBMITTED, launcher_kind="local", launcher_handle={}, submitted_at=now
        )
        behind = waiting(store, flat, capacity=1, now=now)
        store.runs.transition(
            ahead.id,
            RunState.RUNNING,
            started_at=now,
            first_delivery_at=now - timedelta(seconds=10),
            confirmed=325,  # what the ramp's first 10 s send: 3.25 s at the full rate
        )
        in_its_ramp = waiting(store, flat, capacity=1, now=now)

    assert (flat.publish_s, ramped.publish_s) == (30.0, 39.0)
    assert behind.queue_s == 20.0 + 39.0 + 3.0  # its start-up, its ramped publishing, its wind-down
    # 10 s into its ramp: 29 s of its 39 s left, not its 2,675 rows left at the full rate's 26.75 s
    assert in_its_ramp.queue_s == pytest.approx(29.0 + 3.0)


def test_a_shaped_run_holding_a_slot_holds_it_for_what_is_left_of_its_own_timeline(database_url: str) -> None:
    """tps=original at most 1,000/s, 3,000 rows the plan found take 60 s on their own timeline: 10 s
    in, 50 s are left, not its 2,900 rows at the ceiling's 2.9 s."""
    now, ticks = T0 + timedelta(seconds=50), iter(T0 + timedelta(seconds=i) for i in range(40))
    with Store(database_url, clock=lambda: next(ticks)) as store:
        upgrade(store.engine)
        flat = estimate(store, launcher_kind="local", rows=3_000, tps=100)
        ahead = _run(store, tps=1_000, options=RunOptions(planned_rows=3_000, speed=60.0, shaped_s=60.0))
        assert store.runs.admit(ahead.id, cap=1)
        store.runs.transition(
            ahead.id, RunState.SUBMITTED, launcher_kind="local", launcher_handle={}, submitted_at=now
        )
        queued = waiting(store, flat, capacity=1, now=now)
        store.runs.transition(
            ahead.id,
            RunState.RUNNING,
            started_at=now,
            first_delivery_at=now - timedelta(seconds=10),
            confirmed=100,
        )
        delivering = waiting(store, flat, capacity=1, now=now)

    assert queued.queue_s == 20.0 + 60.0 + 3.0  # its start-up, its own timeline, its wind-down
    assert delivering.queue_s == pytest.approx(50.0 + 3.0)
