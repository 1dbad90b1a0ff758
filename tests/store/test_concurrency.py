"""Concurrent writers (threads standing in for two daemons or a retried Slack command).

Each thread gets its own connections from the pool, as separate processes would; on SQLite
the writers serialise on the database lock, on PostgreSQL on row locks and SKIP LOCKED.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from daemon.core.errors import StaleUpdate
from store import Store
from store.migrate import upgrade
from store.models import Run
from tests.fixtures.store_rows import in_parallel


def new_run(store: Store) -> Run:
    return store.runs.create(kind="replay", source="lake.orders", topic="t", tps=1, requester="U1")


def test_concurrent_increments_lose_nothing(store: Store) -> None:
    run = new_run(store)

    def bump(_: int) -> None:
        for _ in range(50):
            store.runs.add_counts(run.id, confirmed=1, duplicates=2)

    in_parallel(2, bump)
    final = store.runs.get(run.id)
    assert (final.confirmed, final.duplicates, final.version) == (100, 200, 101)


def test_concurrent_progress_updates_lose_nothing(store: Store) -> None:
    run = store.runs.transition(new_run(store).id, "running")

    def report(worker: int) -> None:
        for i in range(50):
            store.runs.update_progress(run.id, worker * 1000 + i, float(i))

    in_parallel(2, report)
    final = store.runs.get(run.id)
    assert final.version == run.version + 100
    assert len(store.runs.progress(run.id)) == 100
    assert final.confirmed in {49, 1049}  # whichever thread wrote last


def test_optimistic_writers_conflict_instead_of_overwriting(store: Store) -> None:
    run = new_run(store)

    def cancel_or_submit(i: int) -> str:
        try:
            store.runs.transition(run.id, "cancelled" if i else "submitted", expected_version=run.version)
        except StaleUpdate:
            return "stale"
        return "ok"

    assert sorted(in_parallel(2, cancel_or_submit)) == ["ok", "stale"]
    assert store.runs.get(run.id).version == 2


def test_two_owners_never_lease_the_same_run(database_url: str) -> None:
    # Separate stores (engines), like two daemon processes.
    daemons = [Store(database_url) for _ in range(4)]
    upgrade(daemons[0].engine)
    try:
        all_ids = {new_run(daemons[0]).id for _ in range(48)}
        claimed: list[str] = []
        for round_no in range(3):  # each round: 4 new owners race for 4 runs each

            def lease(i: int, r: int = round_no) -> list[Run]:
                return daemons[i].runs.lease_unfinished(f"d{r}-{i}", 300, 4)

            results = in_parallel(4, lease)
            for i, runs in enumerate(results):
                assert all(run.lease_owner == f"d{round_no}-{i}" for run in runs)
            claimed += [run.id for runs in results for run in runs]
        assert len(claimed) == len(set(claimed)) == 48
        assert set(claimed) == all_ids
        assert daemons[0].runs.lease_unfinished("late", 300, 10) == []
    finally:
        for daemon in daemons:
            daemon.close()


def test_leases_expire_renew_and_release(database_url: str) -> None:
    now = [datetime(2024, 1, 1, tzinfo=UTC)]
    with Store(database_url, clock=lambda: now[0]) as store:
        upgrade(store.engine)
        first = new_run(store)
        now[0] += timedelta(seconds=1)
        second = new_run(store)
        finished = store.runs.transition(new_run(store).id, "succeeded")
        assert [r.id for r in store.runs.lease_unfinished("a", 30, 10)] == [first.id, second.id]
        assert store.runs.lease_unfinished("b", 30, 10) == []
        assert [r.id for r in store.runs.lease_unfinished("a", 30, 1)] == [first.id]  # own leases come back
        now[0] += timedelta(seconds=20)
        assert store.runs.renew_lease(first.id, "a", 30)
        assert not store.runs.renew_lease(first.id, "b", 30)
        assert not store.runs.renew_lease(finished.id, "a", 30)
        now[0] += timedelta(seconds=20)  # second's lease lapsed, first's was renewed
        assert [r.id for r in store.runs.lease_unfinished("b", 30, 10)] == [second.id]
        assert store.runs.release_lease(first.id, "a")
        assert not store.runs.release_lease(first.id, "a")
        assert store.runs.get(first.id).lease_owner is None
        done = store.runs.transition(second.id, "failed")
        assert (done.lease_owner, done.lease_expires_at) == (None, None)
        assert store.runs.get(first.id).version == 1  # lease bookkeeping is not a change to the run


def test_retried_command_creates_one_run(store: Store) -> None:
    def submit(_: int) -> tuple[str, bool]:
        run, created = store.runs.create_or_get(
            "U1", "cmd-7", kind="replay", source="lake.orders", topic="t", tps=1
        )
        return run.id, created

    results = in_parallel(6, submit)
    assert len({run_id for run_id, _ in results}) == 1
    assert sorted(created for _, created in results) == [False] * 5 + [True]


@pytest.mark.parametrize("workers", [8])
def test_record_once_has_one_winner(store: Store, workers: int) -> None:
    results = in_parallel(workers, lambda _: store.notifications.record_once("k", channel="C", kind="done"))
    assert sorted(results) == [False] * (workers - 1) + [True]
