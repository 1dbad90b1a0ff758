"""Erased keys' events never leave the table: the real job, an erasure list, the topic as truth.

The list is a CSV of customer ids with their erasure times. The topic must hold exactly the window's
events less those of customers erased up to the list's version, by pyarrow over the table (not the
job's own count); the report says how many it left out and which version it honoured, and the
reconcile is clean (a left-out event is never expected, so never missing). An erasure after the
pinned version is not honoured by that run. A list that cannot be read fails the run before a
single record is sent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from pyspark.sql import SparkSession

from tests.fixtures.kafka import consume_all, create_topic, topic_record_count, unique_topic, value_of
from tests.fixtures.spark import job_spec, run_in_process

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _customers(table: Path) -> list[str]:
    """Customers with events in the window (2024-01-02..04), most events first."""
    rows = ds.dataset(table, format="parquet", partitioning="hive").to_table(
        columns=["customer_id"], filter=(ds.field("dt") >= "2024-01-02") & (ds.field("dt") <= "2024-01-04")
    )
    counts: dict[str, int] = {}
    for customer in rows.column("customer_id").to_pylist():
        counts[customer] = counts.get(customer, 0) + 1
    return sorted(counts, key=lambda c: -counts[c])


def _window_ids(table: Path, erased: set[str]) -> tuple[set[str], int]:
    """The window's event ids of customers not in ``erased``, and how many events ``erased`` had."""
    dataset = ds.dataset(table, format="parquet", partitioning="hive")
    rows = dataset.to_table(
        columns=["event_id", "customer_id"],
        filter=(ds.field("dt") >= "2024-01-02") & (ds.field("dt") <= "2024-01-04"),
    ).to_pylist()
    kept = {row["event_id"] for row in rows if row["customer_id"] not in erased}
    return kept, sum(1 for row in rows if row["customer_id"] in erased)


def _erasures(path: Path, **overrides: object) -> dict[str, object]:
    return {
        "path": str(path),
        "format": "csv",
        "column": "customer_id",
        "key": "customer_id",
        "erased_at": "erased_at",
        **overrides,
    }


def test_erased_customers_events_are_left_out_and_counted_and_the_reconcile_is_clean(
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    first, second, later = _customers(sample_table)[:3]
    listed = tmp_path / "erasures.csv"
    listed.write_text(
        "customer_id,erased_at\n"
        f"{first},2024-05-01T10:00:00Z\n"
        f"{second},2024-05-02T09:30:00Z\n"
        f"{later},2024-06-01T00:00:00Z\n"  # after the version this run honours
        "cus-never-seen,2024-04-01T00:00:00Z\n"
    )
    topic = unique_topic("replay-erasures")
    create_topic(kafka_bootstrap, topic, partitions=2)
    document = job_spec(
        sample_table, kafka_bootstrap, topic, erasures=_erasures(listed, as_of="2024-05-02T09:30:00Z")
    )

    run = run_in_process(spark, tmp_path, document, capsys)

    assert run.kind == "REPLAY_RESULT", run.document
    expected, left_out = _window_ids(sample_table, {first, second})
    landed = consume_all(kafka_bootstrap, topic, expected=len(expected))
    assert {json.loads(value_of(m))["event_id"] for m in landed} == expected
    assert not [m for m in landed if json.loads(value_of(m))["customer_id"] in (first, second)]
    assert run.document["confirmed"] == run.document["rows_selected"] == len(expected)
    assert (run.document["suppressed"], run.document["erasures_as_of"]) == (left_out, "2024-05-02T09:30:00Z")
    reconciled = run.document["reconcile"]
    assert (reconciled["selected"], reconciled["missing"], reconciled["unexpected"]) == (len(expected), 0, 0)
    assert reconciled["suppressed"] == left_out > 0


def test_without_a_pinned_version_the_job_honours_the_whole_list_and_names_its_newest_erasure(
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    erased = _customers(sample_table)[:2]
    listed = tmp_path / "erasures.csv"
    listed.write_text(
        "customer_id,erased_at\n" + "".join(f"{c},2024-05-0{n + 1}T00:00:00Z\n" for n, c in enumerate(erased))
    )
    topic = unique_topic("replay-erasures-pin")
    create_topic(kafka_bootstrap, topic, partitions=2)

    run = run_in_process(
        spark, tmp_path, job_spec(sample_table, kafka_bootstrap, topic, erasures=_erasures(listed)), capsys
    )

    expected, left_out = _window_ids(sample_table, set(erased))
    assert run.kind == "REPLAY_RESULT", run.document
    assert run.document["confirmed"] == len(expected)
    assert (run.document["suppressed"], run.document["erasures_as_of"]) == (left_out, "2024-05-02T00:00:00Z")


@pytest.mark.parametrize(
    ("problem", "reason"),
    [("gone", "cannot read the erasure list"), ("no key column", "has no column 'customer_id'")],
)
def test_a_list_that_cannot_be_read_fails_the_run_before_anything_is_sent(
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    problem: str,
    reason: str,
) -> None:
    listed = tmp_path / "erasures.csv"
    if problem == "no key column":
        listed.write_text("customer,erased_at\ncus-1,2024-05-01T00:00:00Z\n")
    topic = unique_topic("replay-erasures-gone")
    create_topic(kafka_bootstrap, topic, partitions=2)

    run = run_in_process(
        spark, tmp_path, job_spec(sample_table, kafka_bootstrap, topic, erasures=_erasures(listed)), capsys
    )

    assert run.kind == "REPLAY_FAILED" and reason in run.document["reason"], run.document
    assert topic_record_count(kafka_bootstrap, topic) == 0


def test_a_key_file_that_changed_since_the_plan_fails_the_run_before_anything_is_sent(
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    listed = tmp_path / "keys.txt"
    listed.write_text("ord-00387\nord-00394\n")
    topic = unique_topic("replay-keys-changed")
    create_topic(kafka_bootstrap, topic, partitions=2)
    planned = {"path": str(listed), "column": "order_id", "digest": "0" * 64}  # not these keys' digest

    run = run_in_process(
        spark, tmp_path, job_spec(sample_table, kafka_bootstrap, topic, keys_file=planned), capsys
    )

    assert run.kind == "REPLAY_FAILED" and "changed since the run was planned" in run.document["reason"]
    assert topic_record_count(kafka_bootstrap, topic) == 0
