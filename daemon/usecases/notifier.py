"""The notifier interface: how the watcher tells people what their runs are doing.

The watcher decides *whether* to notify (dedup keys in the store make every message at-most-once,
across restarts); a notifier only renders and delivers. `SlackNotifier` posts threads; the
`LogNotifier` writes log lines for a Slack-less install; `RecordingNotifier` is for tests.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from store.models import Pipeline

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RunView:
    """What a notification needs to know about a run, detached from the store's models."""

    run_id: str
    source: str
    window: str
    topic: str
    tps: int
    requester: str
    state: str
    rows: int | None = None
    confirmed: int = 0
    rate: float | None = None
    eta_s: float | None = None
    achieved_tps: float | None = None
    duration_s: float | None = None
    reason: str | None = None
    channel: str | None = None
    thread_ts: str | None = None
    pipeline_id: str | None = None  # set for a scheduled run: it replies in its pipeline's thread


@dataclass(frozen=True)
class IdlePrompt:
    """The question put to an owner of an idle pipeline."""

    pipeline: Pipeline
    idle_since: datetime
    deadline: datetime
    keep_days: int


class Notifier(ABC):
    @abstractmethod
    def run_started(self, run: RunView) -> str | None:
        """Announce the run; returns the thread id (Slack ts) later messages reply to, if any."""

    @abstractmethod
    def run_progress(self, run: RunView) -> None: ...

    @abstractmethod
    def run_finished(self, run: RunView) -> None:
        """The final word: confirmed count and rate, or the failure reason and a next step."""

    def idle_prompt(self, prompt: IdlePrompt, owner: str) -> str:
        """Ask one owner about an idle pipeline (Keep / Delete now); returns where it was delivered."""
        log.info(
            "notify idle pipeline", pipeline_id=prompt.pipeline.id, owner=owner, deadline=str(prompt.deadline)
        )
        return "log"

    def pipeline_removed(self, pipeline: Pipeline, owner: str, removed: list[str], reason: str) -> str:
        """Tell one owner what de-provisioning removed; returns where it was delivered."""
        log.info(
            "notify pipeline removed", pipeline_id=pipeline.id, owner=owner, removed=removed, reason=reason
        )
        return "log"

    def pipeline_scheduled(self, pipeline: Pipeline) -> str | None:
        """Announce a new pipeline; returns the thread its runs will reply in, if any."""
        log.info("notify pipeline scheduled", pipeline_id=pipeline.id, schedule=pipeline.schedule)
        return None


class LogNotifier(Notifier):
    def run_started(self, run: RunView) -> str | None:
        log.info(
            "notify run started", run_id=run.run_id, source=run.source, window=run.window, topic=run.topic
        )
        return None

    def run_progress(self, run: RunView) -> None:
        log.info(
            "notify run progress", run_id=run.run_id, confirmed=run.confirmed, rows=run.rows, rate=run.rate
        )

    def run_finished(self, run: RunView) -> None:
        log.info(
            "notify run finished",
            run_id=run.run_id,
            state=run.state,
            confirmed=run.confirmed,
            reason=run.reason,
        )


@dataclass
class RecordingNotifier(Notifier):
    """Keeps every call, in order, for assertions."""

    calls: list[tuple[str, RunView]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _record(self, kind: str, run: RunView) -> None:
        with self._lock:
            self.calls.append((kind, run))

    def run_started(self, run: RunView) -> str | None:
        self._record("started", run)
        return f"ts-{run.run_id}"

    def run_progress(self, run: RunView) -> None:
        self._record("progress", run)

    def run_finished(self, run: RunView) -> None:
        self._record("finished", run)

    def of_kind(self, kind: str) -> list[RunView]:
        with self._lock:
            return [run for k, run in self.calls if k == kind]

    def summary(self) -> list[dict[str, Any]]:
        return [{"kind": k, "run_id": r.run_id, "state": r.state} for k, r in self.calls]
