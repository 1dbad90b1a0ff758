"""RunRepository on both dialects: round trips, the state machine, idempotency, pagination, time."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import make_url

from daemon.core.errors import InvalidTransition, RunNotFound, StaleUpdate
from daemon.core.run_options import RunOptions, WindowKind
from daemon.core.states import RUN_TRANSITIONS, TERMINAL_RUN_STATES, RunKind, RunState
from store import Store
from store.migrate import upgrade
from tests.fixtures.store_rows import new_run

IST = timezone(timedelta(hours=5, minutes=30))


def assert_utc(value: datetime | None) -> None:
    assert value is not None
    assert value.tzinfo is UTC


def test_round_trip_keeps_every_field(store: Store) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    created = new_run(
        store,
        window_start=start,
        window_end=start + timedelta(days=7),
        window_label="2024-01-01..2024-01-07",
        watermark_column="updated_at",
        topic_created=True,
        options=RunOptions(window=WindowKind.DAYS, headers={"x-replay": "1"}, ordering="none", workers=4),
        slack_channel="C1",
        slack_ts="1700000000.000100",
    )
    assert re.fullmatch(r"r-[0-9a-f]{12}", created.id)
    run = store.runs.get(created.id)
    assert (run.kind, run.state, run.version) == ("replay", RunState.QUEUED, 1)
    assert run.window_start == start and run.window_end == start + timedelta(days=7)
    assert run.window_label == "2024-01-01..2024-01-07"
    assert run.options == RunOptions(
        window=WindowKind.DAYS, headers={"x-replay": "1"}, ordering="none", workers=4
    )
    assert run.topic_created is True
    assert (run.confirmed, run.failed_tasks, run.duplicates) == (0, 0, 0)
    assert (run.slack_channel, run.slack_ts) == ("C1", "1700000000.000100")
    assert run.created_at == run.updated_at == created.created_at


def test_unknown_run_raises_run_not_found_with_the_id(store: Store) -> None:
    with pytest.raises(RunNotFound, match=r"^no run with id 'r-42'$") as caught:
        store.runs.get("r-42")
    assert isinstance(caught.value, LookupError)
    assert caught.value.run_id == "r-42"
    with pytest.raises(RunNotFound):
        store.runs.transition("r-42", "submitted")


def test_timestamps_come_back_aware_utc(database_url: str) -> None:
    # A non-UTC session time zone on PostgreSQL must not leak into what callers see.
    url = make_url(database_url)
    if url.get_backend_name() == "postgresql":
        options = f"{url.query.get('options', '')} -c timezone=Asia/Kolkata".strip()
        url = url.update_query_dict({"options": options})
    with Store(url) as store:
        upgrade(store.engine)
        local = datetime(2024, 3, 1, 9, 30, tzinfo=IST)
        run = new_run(store, window_start=local, window_end=local + timedelta(hours=1))
        loaded = store.runs.get(run.id)
        for value in (loaded.window_start, loaded.window_end, loaded.created_at, loaded.updated_at):
            assert_utc(value)
        assert loaded.window_start == datetime(2024, 3, 1, 4, 0, tzinfo=UTC)


def test_naive_datetimes_are_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="window_start must be timezone-aware"):
        new_run(store, window_start=datetime(2024, 1, 1))


def test_objects_stay_readable_after_their_session(store: Store) -> None:
    run = store.runs.transition(new_run(store).id, "submitted")
    assert run.submitted_at is not None and run.state == "submitted"
    assert store.runs.list()[0][0].id == run.id


def test_lifecycle_stamps_times_and_bumps_version(store: Store) -> None:
    run = new_run(store)
    submitted = store.runs.transition(run.id, "submitted", launcher_kind="local")
    running = store.runs.transition(run.id, RunState.RUNNING, rows_selected=1000)
    done = store.runs.transition(run.id, "succeeded", confirmed=1000, achieved_tps=498.5)
    assert (submitted.version, running.version, done.version) == (2, 3, 4)
    assert_utc(done.submitted_at)
    assert_utc(done.started_at)
    assert_utc(done.ended_at)
    assert done.submitted_at and done.started_at and done.ended_at  # narrowed: assert_utc checked each
    assert done.submitted_at <= done.started_at <= done.ended_at
    assert (done.rows_selected, done.confirmed, done.achieved_tps) == (1000, 1000, 498.5)
    assert store.runs.get(run.id).launcher_kind == "local"


@pytest.mark.parametrize("terminal", sorted(TERMINAL_RUN_STATES))
def test_terminal_states_are_final(store: Store, terminal: RunState) -> None:
    run = new_run(store)
    store.runs.transition(run.id, terminal)
    for target in RunState:
        with pytest.raises(InvalidTransition, match="it has finished") as caught:
            store.runs.transition(run.id, target)
        assert isinstance(caught.value, ValueError)
    assert store.runs.get(run.id).state == terminal


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        (["running"], "submitted"),
        (["running"], "queued"),
        (["cancelling"], "running"),
        (["cancelling"], "skipped"),
        (["submitted"], "submitted"),
    ],
)
def test_backwards_moves_are_refused(store: Store, path: list[str], refused: str) -> None:
    run = new_run(store)
    for state in path:
        store.runs.transition(run.id, state)
    with pytest.raises(InvalidTransition, match=f"cannot go from '{path[-1]}' to '{refused}'"):
        store.runs.transition(run.id, refused)


def test_every_allowed_transition_is_accepted(store: Store) -> None:
    routes = {RunState.QUEUED: [], RunState.SUBMITTED: ["submitted"], RunState.RUNNING: ["running"]}
    routes[RunState.CANCELLING] = ["cancelling"]
    for source, route in routes.items():
        for target in RUN_TRANSITIONS[source]:
            run = new_run(store)
            for state in route:
                store.runs.transition(run.id, state)
            assert store.runs.transition(run.id, target).state == target


def test_unknown_fields_and_states_are_rejected(store: Store) -> None:
    run = new_run(store)
    with pytest.raises(TypeError, match="cannot set requester"):
        store.runs.transition(run.id, "submitted", requester="U999")
    with pytest.raises(ValueError, match="'done' is not a valid RunState"):
        store.runs.transition(run.id, "done")
    assert store.runs.get(run.id).version == 1


def test_expected_version_detects_a_concurrent_change(store: Store) -> None:
    run = new_run(store)
    store.runs.transition(run.id, "submitted", expected_version=run.version)
    with pytest.raises(StaleUpdate, match="expected 1") as caught:
        store.runs.transition(run.id, "cancelled", expected_version=run.version)
    assert (caught.value.expected_version, caught.value.actual_version) == (1, 2)
    assert store.runs.get(run.id).state == "submitted"


def test_update_sets_fields_after_the_run_finished(store: Store) -> None:
    run = new_run(store)
    store.runs.transition(run.id, "failed", failure_reason="broker unreachable")
    updated = store.runs.update(run.id, slack_ts="1700000000.1", duplicates=3)
    assert (updated.slack_ts, updated.duplicates, updated.state) == ("1700000000.1", 3, "failed")


def test_idempotency_key_returns_the_same_run(store: Store) -> None:
    first, created = store.runs.create_or_get(
        "U1", "slack-trigger-1", kind="replay", source="a", topic="t", tps=5
    )
    again, created_again = store.runs.create_or_get(
        "U1", "slack-trigger-1", kind="replay", source="b", topic="t", tps=9
    )
    other, created_other = store.runs.create_or_get(
        "U2", "slack-trigger-1", kind="replay", source="a", topic="t", tps=5
    )
    assert (created, created_again, created_other) == (True, False, True)
    assert again.id == first.id and again.source == "a"
    assert other.id != first.id
    assert len(store.runs.list()[0]) == 2


def test_progress_samples_and_counters(store: Store) -> None:
    run = new_run(store)
    store.runs.transition(run.id, "running")
    store.runs.update_progress(run.id, 100, 50.0)
    latest = store.runs.update_progress(run.id, 250, 75.5)
    assert latest.confirmed == 250
    samples = store.runs.progress(run.id)
    assert [(s.confirmed, s.rate) for s in samples] == [(100, 50.0), (250, 75.5)]
    assert_utc(samples[0].at)
    assert [s.confirmed for s in store.runs.progress(run.id, limit=1)] == [250]
    counted = store.runs.add_counts(run.id, failed_tasks=2, duplicates=7)
    assert (counted.failed_tasks, counted.duplicates) == (2, 7)
    store.runs.transition(run.id, "succeeded")
    with pytest.raises(InvalidTransition, match="a finished run takes no progress"):
        store.runs.update_progress(run.id, 300, 1.0)
    with pytest.raises(RunNotFound):
        store.runs.progress("r-000000000000")


def test_a_concluded_runs_samples_go_once_its_own_series_replaced_them(store: Store) -> None:
    with_series, without_series, going = new_run(store), new_run(store), new_run(store)
    for run in (with_series, without_series, going):
        store.runs.transition(run.id, "running")
        store.runs.update_progress(run.id, 100, 50.0)
        store.runs.update_progress(run.id, 200, 50.0)
    series = {"start": 1_700_000_000, "counts": [100, 100]}
    store.runs.transition(with_series.id, "succeeded", rate_series=series)
    store.runs.transition(without_series.id, "cancelled")

    assert [store.runs.compact_progress(run.id) for run in (with_series, without_series, going)] == [2, 0, 0]
    assert store.runs.progress(with_series.id) == []
    assert len(store.runs.progress(without_series.id)) == len(store.runs.progress(going.id)) == 2
    assert store.runs.get(with_series.id).rate_series == series  # the chart it is drawn from now


def test_set_handle(store: Store) -> None:
    run = new_run(store)
    store.runs.set_handle(run.id, "emr", {"application_id": "00f1", "job_run_id": "00f2"})
    loaded = store.runs.get(run.id)
    assert (loaded.launcher_kind, loaded.launcher_handle) == (
        "emr",
        {"application_id": "00f1", "job_run_id": "00f2"},
    )


def test_a_reconcile_run_and_the_report_columns_round_trip(store: Store) -> None:
    """The `reconcile` kind passes the migrated check constraint; unknown duplicates stay None."""
    subject = new_run(store)
    store.runs.transition(subject.id, RunState.RUNNING)
    report: dict[str, Any] = {
        "duplicates": None,
        "on_topic_at_least": 12,
        "behind_schedule_s": 0.25,
        "partition_skew": 1.5,
        "rate_series": {"start": 1704067200, "counts": [5, 7]},
        "offsets": {"topic": "orders.replay", "partitions": {"0": [0, 12]}},
        "reconcile": {"selected": 12, "found": 12, "missing": 0, "unexpected": 0, "duplicates": 0},
    }
    store.runs.transition(subject.id, RunState.FAILED, **report)
    check = new_run(store, kind="reconcile", tps=0, reconciles=subject.id)
    pending = store.runs.unfinished_reconcile(subject.id)
    assert pending is not None and (pending.id, pending.kind, pending.reconciles) == (
        check.id,
        "reconcile",
        subject.id,
    )
    stored = store.runs.get(subject.id)
    assert {name: getattr(stored, name) for name in report} == report
    runs, _ = store.runs.list(kinds=[RunKind.REPLAY])
    assert [run.id for run in runs] == [subject.id]
    store.runs.transition(check.id, RunState.SUCCEEDED)
    assert store.runs.unfinished_reconcile(subject.id) is None
