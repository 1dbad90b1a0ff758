"""A run's live-control changes in the store, on both dialects: written only over the version read."""

from __future__ import annotations

import pytest

from daemon.core.errors import RunNotFound, StaleUpdate
from daemon.core.run_control import RateChange, changes_from
from store import Store
from tests.fixtures.store_rows import new_run

PAUSE = RateChange(at=1_700_000_001.25, tps=500, paused=True)
RESUME = RateChange(at=1_700_000_061.5, tps=2000, paused=False)


def test_a_new_run_has_no_changes(store: Store) -> None:
    assert store.runs.get(new_run(store).id).control is None


def test_changes_round_trip_in_order_and_bump_the_version(store: Store) -> None:
    run = new_run(store)

    written = store.runs.set_control(run.id, [PAUSE.to_dict()], expected_version=run.version)
    written = store.runs.set_control(
        run.id, [PAUSE.to_dict(), RESUME.to_dict()], expected_version=written.version
    )

    assert written.version == run.version + 2
    assert changes_from(store.runs.get(run.id).control) == (PAUSE, RESUME)


def test_a_write_over_a_stale_version_changes_nothing(store: Store) -> None:
    run = new_run(store)
    store.runs.update_progress(run.id, 10, 5.0)  # the watcher wrote the run meanwhile

    with pytest.raises(StaleUpdate):
        store.runs.set_control(run.id, [PAUSE.to_dict()], expected_version=run.version)

    assert store.runs.get(run.id).control is None


def test_an_unknown_run_is_not_found(store: Store) -> None:
    with pytest.raises(RunNotFound):
        store.runs.set_control("r-000000000000", [PAUSE.to_dict()], expected_version=1)
