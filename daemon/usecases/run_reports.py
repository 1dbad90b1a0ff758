"""A job's final line as the run's stored report: what it measured, and nothing it did not.

The job's document (``spark_job.result``) becomes run columns here, in one place. A figure the job
did not report stays None (shown as "not measured"), never 0: a failed run's duplicates are unknown
when its beacons could not be read, and an unknown is not a clean result.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from daemon.contract.models import ReconcileOut
from daemon.core.partitions import from_job_report
from daemon.core.reconcile import storable

_SAMPLE = 10


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _moment(value: Any) -> datetime | None:
    """An ISO-8601 UTC stamp from the job (``...Z``); None when absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def report_fields(result: dict[str, Any], *, confirmed_so_far: int | None, now: datetime) -> dict[str, Any]:
    """Run columns from a ``REPLAY_RESULT`` / ``REPLAY_FAILED`` document.

    A document without ``confirmed`` (a job that ended before it could say) keeps what progress
    counted; ``confirmed: null`` is unknown and stays None, with progress's count as the lower bound
    ``on_topic_at_least`` (the broker confirmed at least that many)."""
    reported = result.get("confirmed", confirmed_so_far)
    fields: dict[str, Any] = {
        "confirmed": _int(reported),
        "failed_tasks": int(result.get("failed_tasks") or 0),
        "duplicates": _int(result.get("duplicates_possible")),
    }
    optional = {
        "rows_selected": _int(result.get("rows_selected")),
        "achieved_tps": _float(result.get("achieved_tps")),
        "dead_lettered": _int(result.get("dead_lettered")),
        "on_topic_at_least": _int(result.get("on_topic_at_least")),
        "behind_schedule_s": _float(result.get("behind_schedule_s")),
        "bytes_held_s": _float(result.get("bytes_held_s")),
        "transactions": _int(result.get("transactions")),
        "longest_transaction_s": _float(result.get("longest_transaction_s")),
        "resumed": _int(result.get("resumed")),
        "suppressed": _int(result.get("suppressed")),
        "erasures_as_of": _moment(result.get("erasures_as_of")),
        "partition_skew": _float(result.get("partition_skew")),
        "first_delivery_at": _moment(result.get("first_delivery_at")),
        "last_delivery_at": _moment(result.get("last_delivery_at")),
    }
    fields.update({key: value for key, value in optional.items() if value is not None})
    if reported is None and confirmed_so_far:  # unknown in the end, but progress saw this many
        fields["on_topic_at_least"] = max(fields.get("on_topic_at_least") or 0, confirmed_so_far)
    if result.get("status") == "succeeded" and not fields["failed_tasks"]:
        fields["duplicates"] = 0  # no attempt failed: nothing was sent twice
    series = result.get("rate_series")
    if isinstance(series, dict) and series.get("counts"):
        fields["rate_series"] = {"start": int(series["start"]), "counts": [int(c) for c in series["counts"]]}
        if isinstance(series.get("targets"), list):  # a shaped run's: due per second, its own shape
            fields["rate_series"]["targets"] = [float(t) for t in series["targets"]]
            if (slid := _float(series.get("slid_s"))) is not None:
                fields["rate_series"]["slid_s"] = slid
    if isinstance(result.get("offsets"), dict):
        fields["offsets"] = result["offsets"]
    if isinstance(result.get("by_partition"), list):  # the job's own count beats the last beacons seen
        fields["partition_progress"] = from_job_report(result["by_partition"], now).document()
    if isinstance(result.get("reconcile"), dict):
        fields["reconcile"] = reconcile_document(result["reconcile"], now=now, on_demand=False)
    return fields


def reconcile_document(document: dict[str, Any], *, now: datetime, on_demand: bool) -> dict[str, Any]:
    """The job's reconcile document as stored with the run (validated by the wire model)."""
    error = document.get("error")

    def counted(name: str) -> int | None:
        return None if error else _int(document.get(name))

    out = ReconcileOut(
        at=now,
        selected=counted("selected"),
        found=counted("found"),
        missing=counted("missing"),
        unexpected=counted("unexpected"),
        duplicates=counted("duplicates"),
        missing_sample=[storable(i) for i in document.get("missing_sample") or ()][:_SAMPLE],
        unexpected_sample=[storable(i) for i in document.get("unexpected_sample") or ()][:_SAMPLE],
        duplicates_sample=[storable(i) for i in document.get("duplicates_sample") or ()][:_SAMPLE],
        missing_dead_lettered=_int(document.get("missing_dead_lettered")),
        scanned_records=_int(document.get("scanned_records")),
        error=str(error) if error else None,
        on_demand=on_demand,
        suppressed=_int(document.get("suppressed")),
        erasures_as_of=str(document["erasures_as_of"]) if document.get("erasures_as_of") else None,
    )
    return out.model_dump(mode="json")
