"""Each Spark partition of a run: its rows, what the broker confirmed of them, and how it is going.

A run's page shows one line per partition, so a slow or retried one stands out (a skewed key, a task
that lost its executor). While the run goes the lines come from the tasks' progress beacons; when it
ends, from the job's own report. Pure: the adapters read beacons and reports, this module only says
what they mean, and how they are stored on the run (``document``/``from_document``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class PartitionState(StrEnum):
    SENDING = "sending"
    DONE = "done"
    FAILED = "failed"  # its latest attempt failed; Spark may yet retry it


@dataclass(frozen=True)
class PartitionProgress:
    partition: int
    rows: int | None  # rows the job counted for it before publishing; None: not said (an older job)
    confirmed: int  # its records the broker confirmed (its latest attempt's, with what it resumed after)
    attempts: int  # tries so far: more than 1 after a retry
    state: PartitionState

    @property
    def share(self) -> float | None:
        """Confirmed of its rows, 0..1; None without rows (an empty partition is whole: 1)."""
        if self.rows is None:
            return None
        return 1.0 if self.rows == 0 else min(1.0, self.confirmed / self.rows)

    def document(self) -> list[Any]:
        return [self.partition, self.rows, self.confirmed, self.attempts, str(self.state)]

    @classmethod
    def from_document(cls, raw: Iterable[Any]) -> PartitionProgress:
        partition, rows, confirmed, attempts, state = raw
        return cls(
            int(partition),
            None if rows is None else int(rows),
            int(confirmed),
            int(attempts),
            PartitionState(state),
        )


@dataclass(frozen=True)
class Partitions:
    """Every partition heard of, in order, and when (``final``: the job's report, not a beacon)."""

    at: datetime
    lines: tuple[PartitionProgress, ...]
    final: bool = False

    def document(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "final": self.final,
            "partitions": [line.document() for line in self.lines],
        }

    @classmethod
    def from_document(cls, raw: Mapping[str, Any] | None) -> Partitions | None:
        if not raw:
            return None
        lines = tuple(PartitionProgress.from_document(line) for line in raw.get("partitions") or ())
        return cls(datetime.fromisoformat(raw["at"]), lines, bool(raw.get("final")))


def from_job_report(raw: Iterable[Mapping[str, Any]], at: datetime) -> Partitions:
    """The job's ``by_partition`` report (``{partition, rows, confirmed, attempts}`` each): a partition
    in it succeeded, so it is done."""
    lines = sorted(
        (
            PartitionProgress(
                int(line["partition"]),
                None if line.get("rows") is None else int(line["rows"]),
                int(line["confirmed"]),
                max(1, int(line.get("attempts") or 1)),
                PartitionState.DONE,
            )
            for line in raw
        ),
        key=lambda line: line.partition,
    )
    return Partitions(at, tuple(lines), final=True)
