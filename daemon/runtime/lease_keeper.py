"""Claims a tick's runs a page at a time, and keeps their leases alive however long one step blocks.

Each tick pages through *all* unfinished runs, oldest first, rather than rotating a fixed window by
when each run was last stepped: any count of runs is stepped within one tick (a cancel on the 500th
is acted on as soon as one on the 1st), and the oldest-first order admission relies on (no queued run
overtakes an older one) holds across the whole line, which a rotating window would break. Each page
is claimed when the tick reaches it, so its leases start fresh.

A lease is claimed when the watcher's page reaches the run and lasts the TTL; an EMR submit or a slow
Slack call can block one step longer than that. Without renewal the other runs this daemon still has
to step would lapse meanwhile, and a second daemon would take them mid-tick (two drivers of one run).
So a heartbeat renews every lease the tick holds each third of the TTL, in one write, and the watcher
checks (and renews) a run's lease right before stepping it: a lease lost to another daemon after it
lapsed anyway is never acted on. A tick stuck past ``max_hold_s`` stops renewing: a hung daemon must
let its runs go, as a crashed one does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType

import structlog

from store import Store
from store.leases import RunPosition
from store.models import Run

log = structlog.get_logger(__name__)


class LeaseKeeper:
    """Renews ``owner``'s leases on the runs handed to ``hold`` until the ``with`` block ends."""

    def __init__(
        self,
        store: Store,
        owner: str,
        *,
        ttl_s: float,
        max_hold_s: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._owner = owner
        self._ttl_s = ttl_s
        self._max_hold_s = max_hold_s
        self._monotonic = monotonic
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> LeaseKeeper:
        self._thread = threading.Thread(target=self._beat, name=f"lease-keeper-{self._owner}", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def unfinished(self, *, page_size: int) -> Iterator[Run]:
        """Every unfinished run this daemon may drive, oldest first, leased a page at a time and
        kept until the ``with`` block ends."""
        after: RunPosition | None = None
        while True:
            page = self._store.runs.lease_unfinished(self._owner, self._ttl_s, page_size, after=after)
            self.hold(run.id for run in page)
            yield from page
            if len(page) < page_size:
                return
            after = (page[-1].created_at, page[-1].id)

    def hold(self, run_ids: Iterable[str]) -> None:
        """Runs just claimed: keep them until the tick ends."""
        with self._lock:
            self._held.update(run_ids)

    def still_held(self, run_id: str) -> bool:
        """Renew the run's lease now; False (and no longer kept) if another daemon holds it."""
        if self._store.runs.renew_lease(run_id, self._owner, self._ttl_s):
            return True
        with self._lock:
            self._held.discard(run_id)
        return False

    def _beat(self) -> None:
        started = self._monotonic()
        while not self._stop.wait(self._ttl_s / 3):
            if self._monotonic() - started > self._max_hold_s:
                log.warning("tick held its runs too long: their leases are left to lapse", owner=self._owner)
                return
            with self._lock:
                held = set(self._held)
            try:
                kept = self._store.runs.renew_leases(self._owner, held, self._ttl_s)
            except Exception:  # the database blinked: the next beat tries again, well within the TTL
                log.exception("lease renewal failed", owner=self._owner)
                continue
            with self._lock:
                self._held -= held - kept
