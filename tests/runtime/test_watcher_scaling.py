"""The watcher at scale, on both dialects: every run is stepped whatever the count, a tick that blocks
keeps its leases, and releases a daemon could not finish are finished by the next one.

Jobs are represented by an in-process launcher (the launcher port is ours; what is under test is the
watcher's leasing and the store's bookkeeping, not a job). Before: only the 50 oldest unfinished runs
were leased, leases lapsed while a tick blocked, and releases still to do lived in one daemon's memory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from daemon.adapters.log_notifier import LogNotifier
from daemon.core.states import RunKind, RunState
from daemon.runtime.watcher import Watcher, WatcherTiming
from daemon.usecases.ports import Clusters, Handle, JobOutcome, JobState, Launcher
from store import Store
from store.models import Run
from tests.fixtures.progress import NoBeacons


class InProcessJobs(Launcher):
    """Jobs that run until told otherwise; records what the watcher asked of it."""

    kind = "in-process"

    def __init__(self, *, finished: bool = False, refuse_releases: int = 0) -> None:
        self.finished = finished
        self.refuse_releases = refuse_releases
        self.followed: list[str] = []
        self.cancelled: list[str] = []
        self.released: list[str] = []
        self.block_on: str | None = None  # following this run blocks until `unblock` is set
        self.blocked = threading.Event()
        self.unblock = threading.Event()

    def submit(self, run_id: str, spec_json: str, *, workers: int, **_: object) -> Handle:
        return {"run_id": run_id}

    def state(self, handle: Handle) -> JobState:
        run_id = str(handle["run_id"])
        self.followed.append(run_id)
        if run_id == self.block_on:
            self.blocked.set()
            self.unblock.wait(30)
        return JobState.EXITED if self.finished else JobState.RUNNING

    def outcome(self, handle: Handle) -> JobOutcome | None:
        payload = {"status": "succeeded", "rows_selected": 1, "confirmed": 1, "failed_tasks": 0}
        return JobOutcome(succeeded=True, payload=payload) if self.finished else None

    def log_tail(self, handle: Handle, lines: int = 20) -> list[str]:
        return []

    def cancel(self, handle: Handle) -> None:
        self.cancelled.append(str(handle["run_id"]))

    def release(self, handle: Handle) -> bool:
        if self.refuse_releases > 0:
            self.refuse_releases -= 1
            return False
        self.released.append(str(handle["run_id"]))
        return True


def _running(store: Store, count: int) -> list[Run]:
    """``count`` runs whose jobs were submitted and run, oldest first."""
    runs = []
    for i in range(count):
        run = store.runs.create(kind=RunKind.REPLAY, source="orders", topic=f"t{i}", tps=1, requester="U1")
        store.runs.transition(
            run.id, RunState.SUBMITTED, launcher_kind=InProcessJobs.kind, launcher_handle={"run_id": run.id}
        )
        runs.append(store.runs.transition(run.id, RunState.RUNNING))
    return runs


def _watcher(
    store: Store,
    launcher: InProcessJobs,
    owner: str,
    timing: WatcherTiming | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> Watcher:
    return Watcher(
        store=store,
        launcher=launcher,
        notifier=LogNotifier(),
        build_spec=lambda _run: "{}",
        progress=Clusters.one(NoBeacons()),
        owner=owner,
        timing=timing,
        monotonic=monotonic,
    )


@pytest.fixture
def second_store(database_url: str, store: Store) -> Iterator[Store]:
    """Another daemon's connection to the same (migrated) database."""
    other = Store(database_url)
    yield other
    other.close()


def test_every_unfinished_run_is_stepped_in_one_tick_and_a_cancel_on_the_last_is_acted_on(
    store: Store,
) -> None:
    runs = _running(store, 120)
    last = store.runs.transition(runs[-1].id, RunState.CANCELLING)  # as the API records a cancel
    launcher = InProcessJobs()

    _watcher(store, launcher, "daemon-a").tick()

    assert store.runs.get(last.id).state == RunState.CANCELLED
    assert launcher.cancelled == [last.id]
    assert sorted(launcher.followed) == sorted(run.id for run in runs[:-1])  # each once, none left out
    assert {store.runs.get(run.id).lease_owner for run in runs[:-1]} == {"daemon-a"}


def test_pages_of_leases_never_give_one_run_to_two_owners(store: Store) -> None:
    runs = _running(store, 25)
    first_page = store.runs.lease_unfinished("daemon-a", 30, 10)
    rest = store.runs.lease_unfinished("daemon-b", 30, 10)
    rest += store.runs.lease_unfinished("daemon-b", 30, 10, after=(rest[-1].created_at, rest[-1].id))
    after_a = (first_page[-1].created_at, first_page[-1].id)

    assert [run.id for run in first_page] == [run.id for run in runs[:10]]
    assert [run.id for run in rest] == [run.id for run in runs[10:]]
    assert store.runs.lease_unfinished("daemon-a", 30, 10, after=after_a) == []


LEASE_TTL_S = 3.0


def test_a_tick_blocked_past_the_lease_ttl_keeps_its_runs_from_another_daemon(
    store: Store, second_store: Store
) -> None:
    runs = _running(store, 3)
    slow = InProcessJobs()
    slow.block_on = runs[0].id
    # 3 s: a renewal (every third of it) may come 2 s late before a lease lapses. With 1 s, a loaded
    # CI machine once let all three lapse while daemon-a's heartbeat was still due.
    a = _watcher(store, slow, "daemon-a", WatcherTiming(lease_ttl_s=LEASE_TTL_S))
    other = InProcessJobs()
    b = _watcher(second_store, other, "daemon-b", WatcherTiming(lease_ttl_s=LEASE_TTL_S))

    ticking = threading.Thread(target=a.tick)
    ticking.start()
    try:
        assert slow.blocked.wait(10)
        time.sleep(2 * LEASE_TTL_S)  # without renewal every lease of daemon-a has lapsed
        b.tick()
    finally:
        slow.unblock.set()
        ticking.join(30)

    assert other.followed == []  # daemon-b stepped none of daemon-a's runs
    assert sorted(slow.followed) == sorted(run.id for run in runs)
    assert {store.runs.get(run.id).lease_owner for run in runs} == {"daemon-a"}


def test_a_run_taken_over_after_a_stuck_tick_let_it_go_is_not_stepped_by_the_stuck_daemon(
    store: Store, second_store: Store
) -> None:
    runs = _running(store, 3)
    stuck = InProcessJobs()
    stuck.block_on = runs[0].id
    a = _watcher(store, stuck, "daemon-a", WatcherTiming(lease_ttl_s=1.0, max_hold_s=0.5))
    other = InProcessJobs()
    b = _watcher(second_store, other, "daemon-b", WatcherTiming(lease_ttl_s=30.0))

    ticking = threading.Thread(target=a.tick)
    ticking.start()
    try:
        assert stuck.blocked.wait(10)
        time.sleep(2.0)  # past max_hold_s and the TTL: daemon-a's leases lapsed
        b.tick()
    finally:
        stuck.unblock.set()
        ticking.join(30)

    assert sorted(other.followed) == sorted(run.id for run in runs)  # daemon-b took every run over
    assert stuck.followed == [runs[0].id]  # daemon-a, unblocked, stepped nothing it no longer held
    assert {store.runs.get(run.id).lease_owner for run in runs} == {"daemon-b"}


def test_a_release_refused_before_a_restart_is_finished_by_the_next_watcher(
    store: Store, second_store: Store
) -> None:
    (run,) = _running(store, 1)
    before = InProcessJobs(finished=True, refuse_releases=1)

    _watcher(store, before, "daemon-a").tick()  # concludes the run; its release is refused
    assert store.runs.get(run.id).state == RunState.SUCCEEDED
    assert (before.released, store.runs.get(run.id).released_at) == ([], None)

    after = InProcessJobs()  # a restarted daemon: a new watcher, nothing carried over in memory
    restarted = _watcher(second_store, after, "daemon-a2")
    restarted.tick()
    restarted.tick()

    assert after.released == [run.id]  # released once, not at every tick
    assert store.runs.get(run.id).released_at is not None
    assert store.runs.unreleased(InProcessJobs.kind) == []


class DeniedReleases(InProcessJobs):
    """Jobs whose resources this daemon may not free (its role lacks a permission): every try fails."""

    def __init__(self) -> None:
        super().__init__(finished=True)
        self.tries = 0

    def release(self, handle: Handle) -> bool:
        self.tries += 1
        raise PermissionError("AccessDenied: s3:DeleteObject")


def test_a_release_that_keeps_failing_is_tried_again_after_a_pause_that_doubles(store: Store) -> None:
    (run,) = _running(store, 1)
    launcher = DeniedReleases()
    now = [0.0]
    watcher = _watcher(store, launcher, "daemon-a", monotonic=lambda: now[0])

    tries = []
    for at in (0.0, 1.0, 4.9, 5.0, 9.0, 14.9, 15.0, 30.0, 34.9, 35.0):  # a tick at each instant
        now[0] = at
        watcher.tick()
        tries.append(launcher.tries)

    assert store.runs.get(run.id).state == RunState.SUCCEEDED  # concluded, its release refused
    # tried at 0 (as it concluded), then after 5, 10 and 20 s of pause: 0, 5, 15, 35
    assert tries == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4]
    assert store.runs.get(run.id).released_at is None


def test_releases_are_paged_so_refused_ones_never_hide_the_rest(store: Store) -> None:
    runs = _running(store, 7)
    for run in runs:
        store.runs.transition(run.id, RunState.SUCCEEDED)
    launcher = InProcessJobs()

    _watcher(store, launcher, "daemon-a", WatcherTiming(page_size=3)).tick()

    assert sorted(launcher.released) == sorted(run.id for run in runs)
    assert store.runs.unreleased(InProcessJobs.kind) == []
