"""The reconcile verdict: what a run's event-id comparison means, in one word and one line.

A count alone hides substitutions (one missing plus one duplicate still adds up), so the verdict is
built from the three set differences the job computed: ids selected but not on the topic (`missing`),
ids on the topic under this run's header that were never selected (`unexpected`), and extra copies
(`duplicates`). Duplicates carry the event id of their original, so consumers that dedup by id absorb
them; missing or unexpected ids never are. Unknown counts give "not measured", never "clean".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class VerdictKind(StrEnum):
    CLEAN = "clean"  # every selected id exactly once, nothing else
    EXPLAINED = "explained"  # only missing ids, every one of them set aside on the dead-letter topic
    DUPLICATES = "duplicates"  # every id there, some more than once
    MISSING = "missing"  # selected ids not on the topic (and not all explained by the DLQ)
    UNEXPECTED = "unexpected"  # ids under this run's header the run never selected
    NOT_MEASURED = "not measured"  # the reconcile could not be done


@dataclass(frozen=True)
class Tally:
    """The counts of one reconcile; None where nobody knows."""

    selected: int | None
    found: int | None
    missing: int | None
    unexpected: int | None
    duplicates: int | None
    missing_dead_lettered: int | None = None
    error: str | None = None
    # an erasure list: events of erased keys the selection left out (never expected, never missing),
    # and the list's version (its newest erasure) the run honoured; None: the source has no list
    suppressed: int | None = None
    erasures_as_of: str | None = None

    @property
    def measured(self) -> bool:
        counts = (self.selected, self.found, self.missing, self.unexpected, self.duplicates)
        return self.error is None and all(value is not None for value in counts)


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    text: str

    @property
    def clean(self) -> bool:
        return self.kind == VerdictKind.CLEAN


def verdict(tally: Tally) -> Verdict:
    """The worst finding first: unexpected ids, then unexplained missing ones, then duplicates; then
    what an erasure list left out."""
    found = _verdict(tally)
    if tally.suppressed is None:
        return found
    return Verdict(found.kind, f"{found.text}; {suppressed_text(tally.suppressed, tally.erasures_as_of)}")


def suppressed_text(suppressed: int, as_of: str | None) -> str:
    """``suppressed 3 (erasure list as of 2024-05-01T10:00:00Z)``: the erased events left out."""
    version = f"erasure list as of {as_of}" if as_of else "erasure list empty"
    return f"suppressed {suppressed:,} ({version})"


def _verdict(tally: Tally) -> Verdict:
    if not tally.measured:
        return Verdict(VerdictKind.NOT_MEASURED, f"not reconciled: {tally.error or 'counts unknown'}")
    selected, found = tally.selected or 0, tally.found or 0
    missing, unexpected, duplicates = tally.missing or 0, tally.unexpected or 0, tally.duplicates or 0
    aside = tally.missing_dead_lettered or 0
    parts = [f"{n:,} {what}" for n, what in ((missing, "missing"), (unexpected, "unexpected")) if n]
    if duplicates:
        parts.append(f"{duplicates:,} duplicate{'s' if duplicates != 1 else ''}")
    if missing and aside:
        parts[0] += f" ({aside:,} on the dead-letter topic)"
    detail = f"{found:,} on the topic for {selected:,} selected ids"
    if unexpected:
        kind = VerdictKind.UNEXPECTED
    elif missing > aside:
        kind = VerdictKind.MISSING
    elif duplicates:
        kind = VerdictKind.DUPLICATES
    elif missing:
        kind = VerdictKind.EXPLAINED
    else:
        return Verdict(VerdictKind.CLEAN, f"clean: every one of {selected:,} event ids exactly once")
    return Verdict(kind, f"{kind}: {', '.join(parts)} — {detail}")


class IdList(StrEnum):
    """A verdict's full lists: the ids behind its counts (the run's page pages them, as CSV too)."""

    MISSING = "missing"  # selected, not on the topic
    UNEXPECTED = "unexpected"  # on the topic under the run's header, never selected
    DUPLICATED = "duplicated"  # selected, on the topic more than once


# How many ids of each kind a verdict lists at most: the job's bound (``spark_job.result.IDS_KEPT``).
LISTED_AT_MOST = 100_000

Listed = dict[IdList, list[tuple[str, int]]]  # each list's ids, in the job's order, with their records


def listed_ids(document: Mapping[str, Any]) -> Listed:
    """The lists a job's reconcile document carries (``missing_ids``: ids; the others: ``[id, records]``
    pairs), in its order; a document from before them, or a failed reconcile's, lists nothing."""
    if document.get("error"):
        return {kind: [] for kind in IdList}
    missing = [(storable(event_id), 0) for event_id in document.get("missing_ids") or ()]

    def pairs(name: str) -> list[tuple[str, int]]:
        return [(storable(pair[0]), int(pair[1])) for pair in document.get(name) or ()]

    return {
        IdList.MISSING: missing,
        IdList.UNEXPECTED: pairs("unexpected_ids"),
        IdList.DUPLICATED: pairs("duplicated_ids"),
    }


def storable(event_id: Any) -> str:
    """An id as text a store keeps: a NUL (a header's bytes may hold one) becomes U+FFFD, since
    PostgreSQL refuses NUL in text and in JSON."""
    return str(event_id).replace("\x00", "\ufffd")
