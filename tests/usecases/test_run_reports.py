"""A job's final document as the run's stored report (`daemon.usecases.run_reports`)."""

from __future__ import annotations

from datetime import UTC, datetime

from daemon.contract.models import ReconcileOut
from daemon.usecases.run_reports import reconcile_document, report_fields

NOW = datetime(2024, 1, 8, 12, 0, tzinfo=UTC)
RECONCILED = {
    "selected": 3,
    "found": 4,
    "missing": 0,
    "unexpected": 0,
    "duplicates": 1,
    "missing_sample": [],
    "unexpected_sample": [],
    "duplicates_sample": ["e-2"],
    "missing_dead_lettered": None,
    "scanned_records": 4,
    "error": None,
}


def test_a_clean_success_stores_every_measured_figure() -> None:
    fields = report_fields(
        {
            "status": "succeeded",
            "rows_selected": 3,
            "confirmed": 3,
            "failed_tasks": 0,
            "duplicates_possible": 0,
            "achieved_tps": 99.5,
            "behind_schedule_s": 0.0,
            "bytes_held_s": 2.5,
            "partition_skew": 1.5,
            "dead_lettered": 0,
            "rate_series": {"start": 1704067200, "counts": [2, 1]},
            "offsets": {"topic": "t", "partitions": {"0": [0, 3]}},
            "reconcile": RECONCILED,
        },
        confirmed_so_far=1,
        now=NOW,
    )
    assert fields["confirmed"] == 3 and fields["duplicates"] == 0
    assert fields["achieved_tps"] == 99.5 and fields["partition_skew"] == 1.5
    assert fields["bytes_held_s"] == 2.5
    assert fields["rate_series"] == {"start": 1704067200, "counts": [2, 1]}
    assert fields["offsets"]["partitions"] == {"0": [0, 3]}
    stored = ReconcileOut.model_validate(fields["reconcile"])
    assert stored.duplicates == 1 and stored.duplicates_sample == ["e-2"] and not stored.on_demand


def test_unknown_duplicates_stay_unknown_after_a_retry() -> None:
    """Failed attempts whose beacons could not be read: the count is unknown, not 0."""
    fields = report_fields(
        {"status": "succeeded", "confirmed": 5, "failed_tasks": 1, "duplicates_possible": None},
        confirmed_so_far=0,
        now=NOW,
    )
    assert fields["duplicates"] is None
    assert "achieved_tps" not in fields and "rate_series" not in fields


def test_a_failure_after_publishing_keeps_what_reached_the_broker() -> None:
    fields = report_fields(
        {"status": "failed", "reason": "broker gone", "confirmed": 0, "on_topic_at_least": 40},
        confirmed_so_far=37,
        now=NOW,
    )
    assert fields["on_topic_at_least"] == 40
    assert fields["duplicates"] is None  # a failed job did not say: not measured


def test_a_reconcile_that_could_not_run_has_no_counts() -> None:
    stored = ReconcileOut.model_validate(
        reconcile_document({"error": "broker unreachable", "selected": 3}, now=NOW, on_demand=True)
    )
    assert stored.selected is None and stored.error == "broker unreachable" and stored.on_demand
    assert stored.verdict().kind == "not measured"


def test_a_count_the_job_could_not_read_stays_unknown_with_progress_as_the_lower_bound() -> None:
    """`confirmed: null` was stored as 0 over progress's 700: unknown is not 0."""
    fields = report_fields(
        {"status": "failed", "reason": "broker gone", "confirmed": None, "on_topic_at_least": None},
        confirmed_so_far=700,
        now=NOW,
    )
    assert fields["confirmed"] is None
    assert fields["on_topic_at_least"] == 700


def test_a_document_without_a_count_keeps_what_progress_counted() -> None:
    fields = report_fields({"status": "failed", "reason": "lost"}, confirmed_so_far=12, now=NOW)
    assert fields["confirmed"] == 12 and "on_topic_at_least" not in fields


def test_a_shaped_runs_series_keeps_what_was_due_each_second() -> None:
    series = {"start": 1704067200, "counts": [2, 5], "targets": [2.5, 4.5]}
    fields = report_fields(
        {"status": "succeeded", "confirmed": 7, "rate_series": series}, confirmed_so_far=None, now=NOW
    )

    assert fields["rate_series"] == series


def test_a_run_without_a_byte_ceiling_leaves_its_hold_unknown() -> None:
    fields = report_fields(
        {"status": "succeeded", "confirmed": 3, "bytes_held_s": None}, confirmed_so_far=None, now=NOW
    )
    assert "bytes_held_s" not in fields  # never stored as 0


def test_the_jobs_partition_report_becomes_the_runs_final_lines() -> None:
    fields = report_fields(
        {
            "status": "succeeded",
            "confirmed": 7,
            "by_partition": [
                {"partition": 0, "rows": 4, "confirmed": 4, "attempts": 1},
                {"partition": 1, "rows": 3, "confirmed": 3, "attempts": 2},
            ],
        },
        confirmed_so_far=5,
        now=NOW,
    )
    assert fields["partition_progress"] == {
        "at": NOW.isoformat(),
        "final": True,
        "partitions": [[0, 4, 4, 1, "done"], [1, 3, 3, 2, "done"]],
    }
    assert "partition_progress" not in report_fields({"status": "succeeded"}, confirmed_so_far=0, now=NOW)
