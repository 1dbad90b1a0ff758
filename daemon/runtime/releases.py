"""Freeing what finished jobs held (a spec with the Kafka password, a one-time EMR application).

What is still to free is read from the store (a finished run with a handle and no ``released_at``),
never kept in a daemon's memory: a release refused or cut short by a restart is finished by the next
pass of whichever daemon runs it. Launchers release step by step and idempotently, so a release
that needs more time simply gets more passes.
"""

from __future__ import annotations

import structlog

from daemon.usecases.ports import Launcher
from store import Store
from store.models import Run

log = structlog.get_logger(__name__)


class Releases:
    def __init__(self, store: Store, launcher: Launcher, *, page_size: int = 50) -> None:
        self._store = store
        self._launcher = launcher
        self._page_size = page_size

    def finish_pending(self) -> None:
        """One pass over every release still to do, a page at a time (a refused one hides none)."""
        after: str | None = None
        while True:
            page = self._store.runs.unreleased(self._launcher.kind, self._page_size, after=after)
            for run in page:
                self.release(run)
            if len(page) < self._page_size:
                return
            after = page[-1].id

    def release(self, run: Run) -> bool:
        """Free what the run's job held; True once nothing is left (then recorded on the run)."""
        try:
            done = self._launcher.release(run.launcher_handle or {})
        except Exception as exc:  # freeing capacity must not undo a run's conclusion
            log.warning("could not release the job's resources yet", run_id=run.id, error=str(exc))
            return False
        if done:
            self._store.runs.mark_released(run.id)
        return done
