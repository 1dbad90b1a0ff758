"""Freeing what finished jobs held (a spec with the Kafka password, a one-time EMR application).

What is still to free is read from the store (a finished run with a handle and no ``released_at``),
never kept in a daemon's memory: a release refused or cut short by a restart is finished by the next
pass of whichever daemon runs it. Launchers release step by step and idempotently, so a release
that needs more time simply gets more passes. One that fails (say the role lacks `s3:DeleteObject`)
is tried again after a pause that doubles up to `MAX_PAUSE_S`: every tick, for every such run, it
was a cloud call and a warning a second.
"""

from __future__ import annotations

import time

import structlog

from daemon.core.retry import Clock
from daemon.usecases.ports import Launcher
from store import Store
from store.models import Run

log = structlog.get_logger(__name__)

FIRST_PAUSE_S = 5.0
MAX_PAUSE_S = 600.0


class Releases:
    def __init__(
        self,
        store: Store,
        launcher: Launcher,
        *,
        page_size: int = 50,
        monotonic: Clock = time.monotonic,
    ) -> None:
        self._store = store
        self._launcher = launcher
        self._page_size = page_size
        self._monotonic = monotonic
        self._failed: dict[str, tuple[float, float]] = {}  # run id -> (next try, its pause)

    def finish_pending(self) -> None:
        """One pass over every release still to do, a page at a time (a refused one hides none)."""
        after: str | None = None
        pending: set[str] = set()
        while True:
            page = self._store.runs.unreleased(self._launcher.kind, self._page_size, after=after)
            for run in page:
                pending.add(run.id)
                self.release(run)
            if len(page) < self._page_size:
                break
            after = page[-1].id
        for run_id in self._failed.keys() - pending:  # released meanwhile, by another daemon
            del self._failed[run_id]

    def release(self, run: Run) -> bool:
        """Free what the run's job held; True once nothing is left (then recorded on the run). A run
        whose last try failed waits out its pause first."""
        now = self._monotonic()
        failed = self._failed.get(run.id)
        if failed is not None and now < failed[0]:
            return False
        try:
            done = self._launcher.release(run.launcher_handle or {})
        except Exception as exc:  # freeing capacity must not undo a run's conclusion
            pause_s = FIRST_PAUSE_S if failed is None else min(MAX_PAUSE_S, 2 * failed[1])
            self._failed[run.id] = (now + pause_s, pause_s)
            log.warning(
                "could not release the job's resources yet", run_id=run.id, error=str(exc), retry_in_s=pause_s
            )
            return False
        self._failed.pop(run.id, None)
        if done:
            self._store.runs.mark_released(run.id)
        return done
