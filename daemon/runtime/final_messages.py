"""A run's final message: recorded once, delivered at least once, posted exactly once.

The final reply is what a requester waits for, so a failed send is not the end of it. It is recorded
(``notifications``, key ``run:<id>:final``) before the first attempt, so two daemons never both post
it; marked delivered once Slack took it; and a record still undelivered after ``retry_after_s`` (Slack
answered 429 or 500, or the daemon died between recording and sending) is reclaimed by one daemon
and sent again, until ``give_up_after_s``. The notifier raises only when the final reply itself did
not go out, so a retry never posts it twice.
"""

from __future__ import annotations

from datetime import timedelta

import structlog

from daemon.core.errors import ReplayError
from daemon.usecases.ports import Notifier
from daemon.usecases.wire import rate_series_out, run_out
from store import Store
from store.models import Run

log = structlog.get_logger(__name__)
KIND = "final"


def final_key(run_id: str) -> str:
    return f"run:{run_id}:final"


class FinalMessages:
    def __init__(
        self,
        store: Store,
        notifier: Notifier,
        *,
        retry_after_s: float = 5.0,
        give_up_after_s: float = 86_400.0,
    ) -> None:
        self._store = store
        self._notifier = notifier
        self._retry_after = timedelta(seconds=retry_after_s)
        self._give_up_after = timedelta(seconds=give_up_after_s)

    def send(self, run: Run) -> None:
        """The first attempt, by the daemon that concluded the run (and only if nobody recorded it)."""
        if self._store.notifications.record_once(final_key(run.id), run_id=run.id, kind=KIND):
            self._deliver(run)

    def retry_undelivered(self) -> None:
        """Send again every final message Slack has not taken yet (each by one daemon only)."""
        now = self._store.now()
        cutoff = now - self._retry_after
        for note in self._store.notifications.undelivered(
            KIND, recorded_before=cutoff, recorded_after=now - self._give_up_after
        ):
            if note.run_id is None or not self._store.notifications.reclaim(
                note.dedup_key, recorded_before=cutoff
            ):
                continue
            log.info("final message sent again", run_id=note.run_id)
            self._deliver(self._store.runs.get(note.run_id))

    def _deliver(self, run: Run) -> None:
        key = final_key(run.id)
        try:
            self._notifier.run_finished(
                run_out(run),
                rate_series_out(run),
                delivered=lambda: self._store.notifications.mark_delivered(key),
            )
        except ReplayError as exc:
            retry = self._retry_after.total_seconds()
            log.warning(
                "final message not delivered: sent again later",
                run_id=run.id,
                retry_after_s=retry,
                error=str(exc),
            )
            return
