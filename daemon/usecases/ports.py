"""The launcher interface: how the daemon starts, watches and stops a publisher job.

Implementations are named `<Tech>Launcher` (`LocalSparkLauncher`, `EmrServerlessLauncher`). A handle is a
plain JSON-able dict stored with the run, so a restarted daemon can re-attach to a job it did not start.
"""

from __future__ import annotations

import enum
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

Handle = dict[str, Any]

RESULT_PREFIX = "REPLAY_RESULT "
FAILED_PREFIX = "REPLAY_FAILED "


class JobState(enum.Enum):
    PENDING = "pending"  # accepted by the launcher, not running yet
    RUNNING = "running"
    EXITED = "exited"  # the job's process ended; its result line says how
    LOST = "lost"  # the job disappeared without a trace


@dataclass(frozen=True)
class JobOutcome:
    """What the job said about itself in its final line (`REPLAY_RESULT` or `REPLAY_FAILED`)."""

    succeeded: bool
    payload: dict[str, Any]

    @property
    def reason(self) -> str:
        return str(self.payload.get("reason", "")) if not self.succeeded else ""


def parse_outcome(lines: Iterable[str]) -> JobOutcome | None:
    """The last result line among `lines`, if any; other output is ignored."""
    outcome: JobOutcome | None = None
    for line in lines:
        text = line.strip()
        for prefix, ok in ((RESULT_PREFIX, True), (FAILED_PREFIX, False)):
            if text.startswith(prefix):
                try:
                    payload = json.loads(text[len(prefix) :])
                except json.JSONDecodeError:
                    continue
                if isinstance(payload, dict):
                    outcome = JobOutcome(succeeded=ok, payload=payload)
    return outcome


class Launcher(ABC):
    """Submit, poll, read output, cancel. Every method is safe to call again after a daemon restart."""

    kind: str

    @abstractmethod
    def submit(self, run_id: str, spec_json: str, *, workers: int) -> Handle:
        """Start the job; calling it twice for one run id must not start two jobs."""

    @abstractmethod
    def state(self, handle: Handle) -> JobState: ...

    @abstractmethod
    def outcome(self, handle: Handle) -> JobOutcome | None:
        """The job's final result line, once it has printed one."""

    @abstractmethod
    def log_tail(self, handle: Handle, lines: int = 20) -> list[str]:
        """The last lines of the job's output, to explain a failure with no result line."""

    @abstractmethod
    def cancel(self, handle: Handle) -> None:
        """Stop the job; a job already gone is not an error."""

    def release(self, handle: Handle) -> bool:
        """Free what the finished job held (e.g. its own EMR application); True once nothing is left."""
        return True
