"""A run's consumer-group watch in the store, on both dialects: written beside the run (its version
untouched), leased after the run ended while unfinished, and kept across the 0007 -> 0008 migration."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from daemon.core.errors import RunNotFound
from daemon.core.states import RunState
from store import Store
from store.db import create_store_engine
from store.migrate import current_revision, downgrade, upgrade
from tests.fixtures.store_rows import new_run

WATCH = {"topic": "orders", "groups": [{"group": "g", "state": "watching", "baseline": 0, "lag": 12}]}


def _ended(store: Store) -> str:
    run = new_run(store)
    store.runs.transition(run.id, RunState.SUBMITTED)
    store.runs.transition(run.id, RunState.SUCCEEDED)
    return run.id


def test_a_watch_is_stored_without_changing_the_runs_version(store: Store) -> None:
    run = new_run(store)

    store.runs.set_watch(run.id, WATCH, watching=True)

    stored = store.runs.get(run.id)
    assert (stored.watch, stored.watching, stored.version) == (WATCH, True, run.version)


def test_only_finished_runs_with_an_unfinished_watch_are_leased_and_by_one_owner(store: Store) -> None:
    going = new_run(store)
    store.runs.set_watch(going.id, WATCH, watching=True)  # still publishing: the watcher's own lease
    finished = _ended(store)
    store.runs.set_watch(finished, WATCH, watching=True)
    concluded = _ended(store)
    store.runs.set_watch(concluded, WATCH, watching=False)

    first = [run.id for run in store.runs.lease_watching("daemon-a", ttl_s=30)]
    second = [run.id for run in store.runs.lease_watching("daemon-b", ttl_s=30)]

    assert (first, second) == ([finished], [])
    assert store.runs.release_lease(finished, "daemon-a")
    assert [run.id for run in store.runs.lease_watching("daemon-b", ttl_s=30)] == [finished]


def test_an_expired_lease_is_taken_over(store: Store) -> None:
    finished = _ended(store)
    store.runs.set_watch(finished, WATCH, watching=True)
    assert store.runs.lease_watching("crashed", ttl_s=-1)  # already expired: as after a crash

    assert [run.id for run in store.runs.lease_watching("daemon-b", ttl_s=30)] == [finished]


def test_the_watch_of_an_unknown_run_is_not_found(store: Store) -> None:
    with pytest.raises(RunNotFound):
        store.runs.set_watch("r-000000000000", WATCH, watching=True)


def test_migrating_from_0007_keeps_runs_and_starts_them_unwatched(database_url: str) -> None:
    upgrade(database_url, "0007")
    engine = create_store_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO runs (id, kind, source, target_topic, topic_created, tps, options,"
                    " requester, state, confirmed_count, failed_tasks, created_at, updated_at, version)"
                    " VALUES ('r-0123456789ab', 'replay', 's', 't', false, 1, '{}', 'U1', 'succeeded', 0, 0,"
                    " CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 1)"
                )
            )
    finally:
        engine.dispose()

    upgrade(database_url, "0008")

    assert current_revision(database_url) == "0008"
    upgrade(database_url)  # the models hold every later column too: read through them at head
    with Store(database_url) as store:
        run = store.runs.get("r-0123456789ab")
        assert (run.watch, run.watching) == (None, False)
        assert store.runs.lease_watching("d", ttl_s=30) == []
    downgrade(database_url, "0007")
    assert current_revision(database_url) == "0007"
