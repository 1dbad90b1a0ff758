"""The job's DataFrame steps on the shared local session: pruning, windows, records, even shares."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from spark_job import transforms
from spark_job.errors import SourceError
from spark_job.job import PROBE_MULTIPLE, count, select
from spark_job.publish.publisher import EVENT_ID
from spark_job.spec.model import JobSpec, WatermarkRange
from spark_job.spec.parse import spec_from_dict
from tests.fixtures.spark import ids_of, job_spec, lake_ids

pytestmark = pytest.mark.spark


def spec_for(table: Path, **overrides: Any) -> JobSpec:
    return spec_from_dict(job_spec(table, "127.0.0.1:9", "unused", **overrides))


def scan_metrics(df: Any) -> dict[str, int]:
    """Metrics of the executed plan's file scan (what Spark actually listed and read)."""
    df.collect()
    scan = df._jdf.queryExecution().executedPlan().collectLeaves().head()
    metrics = scan.metrics().iterator()
    found: dict[str, int] = {}
    while metrics.hasNext():
        entry = metrics.next()
        found[entry._1()] = entry._2().value()
    return found


def test_day_window_reads_only_its_partitions(spark: SparkSession, sample_table: Path) -> None:
    spec = spec_for(sample_table)  # dt 2024-01-02..2024-01-04 of seven days
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    plan = selected._jdf.queryExecution().executedPlan().toString()
    assert "PartitionFilters: [isnotnull(dt" in plan
    metrics = scan_metrics(selected)
    assert (metrics["numPartitions"], metrics["numFiles"]) == (3, 3)


def test_day_window_selects_exactly_its_days(spark: SparkSession, sample_table: Path) -> None:
    spec = spec_for(sample_table)
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    days = ds.field("dt")
    assert ids_of(selected) == lake_ids(sample_table, (days >= "2024-01-02") & (days <= "2024-01-04"))


def test_time_window_is_half_open(spark: SparkSession, sample_table: Path) -> None:
    start, end = datetime(2024, 1, 3, 6, tzinfo=UTC), datetime(2024, 1, 3, 18, tzinfo=UTC)
    spec = spec_for(
        sample_table, window={"column": "updated_at", "start": start.isoformat(), "end": end.isoformat()}
    )
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    stamps = ds.field("updated_at")
    assert ids_of(selected) == lake_ids(sample_table, (stamps >= start) & (stamps < end))


def test_watermark_range_excludes_low_and_includes_high(spark: SparkSession, sample_table: Path) -> None:
    rows = ds.dataset(sample_table, format="parquet", partitioning="hive").to_table().sort_by("updated_at")
    moments = rows.column("updated_at").to_pylist()
    low, high = moments[100], moments[400]
    watermark = {"column": "updated_at", "low": low.isoformat(), "high": high.isoformat()}
    spec = spec_for(sample_table, window=None, watermark=watermark)
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    assert ids_of(selected) == set(rows.column("event_id").to_pylist()[101:401])


def test_watermark_high_defaults_to_the_largest_selected_value(
    spark: SparkSession, sample_table: Path
) -> None:
    spec = spec_for(sample_table, window=None, watermark={"column": "dt", "low": "2024-01-05"})
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    assert isinstance(spec.selection, WatermarkRange)
    assert transforms.watermark_high(selected, spec.selection) == "2024-01-07"


def test_unknown_column_is_named(spark: SparkSession, sample_table: Path) -> None:
    spec = spec_for(sample_table, key_column="customer")
    with pytest.raises(SourceError, match=r"^unknown column 'customer' in source orders$"):
        select(spark, spec)


def test_empty_window_is_refused(spark: SparkSession, sample_table: Path) -> None:
    spec = spec_for(sample_table, window={"column": "dt", "start_day": "2030-01-01", "end_day": "2030-01-02"})
    with pytest.raises(SourceError, match=r"^no rows in window dt 2030-01-01..2030-01-02 of source orders$"):
        count(select(spark, spec), spec, slots=2)


def test_values_are_the_rows_as_json_and_keys_the_entity(spark: SparkSession, sample_table: Path) -> None:
    spec = spec_for(sample_table)
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    records = transforms.with_record_columns(selected, spec).with_values().collect()
    first = json.loads(bytes(records[0][transforms.VALUE]))
    assert set(first) == {*selected.columns}
    assert bytes(records[0][transforms.KEY]).decode() == first["order_id"]


@pytest.mark.parametrize("ordering", ["none", "entity"])
@pytest.mark.parametrize("partitions", [2, 6, 7])
def test_the_counting_pass_predicts_every_partitions_size(
    spark: SparkSession, sample_table: Path, ordering: str, partitions: int
) -> None:
    """Rule 11: the pacing's sizes come from a pass over one column, never from holding the window;
    they must be exactly what the publish pass's partitions hold (a modulus the partition count does
    not divide needs a census of its own)."""
    spec = spec_for(sample_table, ordering=ordering)
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    spread = transforms.distribute(transforms.with_record_columns(selected, spec), partitions, ordering)
    actual = transforms.partition_sizes(spread, partitions)
    probe = count(selected, spec, slots=2)
    assert (probe.rows, probe.modulus) == (900, 2 * PROBE_MULTIPLE)
    predicted = probe.sizes(partitions) or transforms.census(selected, spec, partitions).sizes(partitions)
    assert predicted == actual
    assert (probe.sizes(7) is None) == (PROBE_MULTIPLE % 7 != 0)


def test_no_ordering_spreads_rows_in_near_equal_shares(spark: SparkSession, sample_table: Path) -> None:
    """By the hash of the event id: every row lands once, and shares are close (900 rows over 6)."""
    spec = spec_for(sample_table, ordering="none")
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    spread = transforms.distribute(transforms.with_record_columns(selected, spec), 6, "none")
    sizes = transforms.partition_sizes(spread, 6)
    assert sum(sizes) == 900
    assert max(sizes) <= 1.3 * min(sizes)
    assert len({row[EVENT_ID] for row in spread.collect()}) == 900


def test_the_counting_pass_finds_the_watermark_high(spark: SparkSession, sample_table: Path) -> None:
    spec = spec_for(sample_table, window=None, watermark={"column": "dt", "low": "2024-01-05"})
    counted = count(select(spark, spec), spec, slots=2)
    assert (counted.rows, counted.high) == (600, "2024-01-07")


def test_entity_ordering_keeps_each_key_in_one_partition_in_event_time_order(
    spark: SparkSession, sample_table: Path
) -> None:
    spec = spec_for(sample_table)
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    spread = transforms.distribute(transforms.with_record_columns(selected, spec), 4, "entity")
    assert spread.rdd.getNumPartitions() == 4
    rows = spread.rdd.mapPartitionsWithIndex(
        lambda index, part: ((index, json.loads(bytes(row[1]))) for row in part)
    ).collect()
    partitions_of: dict[str, set[int]] = {}
    last: dict[str, tuple[str, str]] = {}
    for index, value in rows:
        partitions_of.setdefault(value["order_id"], set()).add(index)
        position = (value["updated_at"], value["event_id"])
        assert last.get(value["order_id"], position) <= position
        last[value["order_id"]] = position
    assert all(len(found) == 1 for found in partitions_of.values())
    assert sum(Counter(index for index, _ in rows).values()) == 900


@pytest.mark.parametrize(
    ("ordering", "ordered"), [("entity", False), ("entity", True), ("none", False), ("none", True)]
)
def test_values_are_made_after_the_shuffle_every_task_waits_for(
    spark: SparkSession, sample_table: Path, ordering: str, ordered: bool
) -> None:
    """The map side reads the whole window before the first task can send: making the json values
    there would delay the first event by the window's encoding (ordered runs make them before their
    sort, which breaks ties by them, but still after the shuffle)."""
    spec = spec_for(sample_table)
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    spread = transforms.distribute(
        transforms.with_record_columns(selected, spec), 4, ordering, ordered=ordered
    )
    plan = spread._jdf.queryExecution().sparkPlan().toString()  # the nodes above run after
    encodings = [found.start() for found in re.finditer(r"StructsToJson|to_json", plan)]
    assert len(encodings) == 1, plan
    assert plan.index("Exchange hashpartitioning") > encodings[0], plan


def test_a_source_column_named_like_a_record_column_is_only_part_of_the_value(
    spark: SparkSession, sample_table: Path
) -> None:
    """The value's own columns travel under the job's names: a source's ``_replay_offset`` does not
    make a run shaped, nor its ``_replay_id`` an event id; both are in the value, as named."""
    spec = spec_for(sample_table)
    selected = transforms.select_window(transforms.read_source(spark, spec.source), spec)
    odd = selected.withColumn("_replay_offset", sf.lit(1.5)).withColumn("_replay_id", sf.lit("not an id"))
    spread = transforms.distribute(transforms.with_record_columns(odd, spec), 2, "entity")
    assert spread.columns == [transforms.KEY, transforms.VALUE, EVENT_ID]
    row = spread.first()
    assert row is not None
    value = json.loads(bytes(row[transforms.VALUE]))
    assert (value["_replay_offset"], value["_replay_id"]) == (1.5, "not an id")
    assert row[EVENT_ID] == value["event_id"]


def test_skew_is_largest_over_smallest() -> None:
    assert transforms.skew([10, 20, 15]) == 2.0
    assert transforms.skew([10, 0]) is None
