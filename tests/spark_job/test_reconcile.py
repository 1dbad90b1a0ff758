"""Reconcile by event id: the pure reference, the Spark reading of offset ranges, and whole runs.

``tally`` is the arithmetic on plain collections; hypothesis holds its invariants, and every Spark
result below is compared with it. The Spark side reads real topics on the real broker: a topic
written here (with small chunks, so ranges split), then a whole replay and a reconcile-only run of it
(docs/rules.md rule 9). Dead letters and retries are reconciled in spark_job/test_dead_letters.py and
spark_job/test_job.py, on the runs those tests already make.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from confluent_kafka import Message, Producer
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from daemon.core.reconcile import LISTED_AT_MOST
from spark_job import main as job_main
from spark_job import reconcile as reconcile_module
from spark_job.reconcile import (
    chunks,
    distinct_ids,
    reconcile,
    reconcile_on_driver,
    tally,
    tally_arrow,
    watermarks,
)
from spark_job.result import IDS_KEPT, SAMPLE_SIZE
from spark_job.spec.model import OffsetRanges, ReconcileTarget
from tests.fixtures.kafka import consume_all, create_topic, headers_of, unique_topic
from tests.fixtures.spark import job_spec, write_spec

WINDOW = ("2024-01-02", "2024-01-04")  # job_spec's default window
COUNTS = ("selected", "found", "missing", "unexpected", "duplicates")
SAMPLES = ("missing_sample", "unexpected_sample", "duplicates_sample")
LISTS = ("missing_ids", "unexpected_ids", "duplicated_ids")

ids = st.text(alphabet="abcdef", min_size=1, max_size=3)


# --- the reference -----------------------------------------------------------------------------------


@given(st.lists(ids, max_size=40), st.lists(ids, max_size=60))
def test_tally_accounts_for_every_record_found(selected: list[str], found: list[str]) -> None:
    result = tally(selected, found)
    assert result.found == len(found) and result.selected == len(set(selected))
    assert result.missing is not None and result.duplicates is not None and result.unexpected is not None
    assert result.found == result.selected - result.missing + result.duplicates + result.unexpected


@given(st.lists(ids, max_size=40), st.lists(ids, max_size=60))
def test_tally_samples_are_the_first_ids_of_each_kind(selected: list[str], found: list[str]) -> None:
    result = tally(selected, found)
    copies = Counter(found)
    kinds = {
        "missing_sample": sorted(set(selected) - set(found)),
        "unexpected_sample": sorted(set(found) - set(selected)),
        "duplicates_sample": sorted(i for i in set(selected) if copies[i] > 1),
    }
    for name, expected in kinds.items():
        assert list(getattr(result, name)) == expected[:SAMPLE_SIZE]


@given(st.lists(ids, max_size=40), st.lists(ids, max_size=60))
def test_tally_lists_every_id_of_each_kind_with_its_records(selected: list[str], found: list[str]) -> None:
    result = tally(selected, found)
    copies = Counter(found)
    assert list(result.missing_ids) == sorted(set(selected) - set(found))
    assert list(result.unexpected_ids) == sorted((i, copies[i]) for i in set(found) - set(selected))
    assert list(result.duplicated_ids) == sorted((i, copies[i]) for i in set(selected) if copies[i] > 1)
    # the lists account for the counts: nothing is listed that is not counted, nor the reverse
    assert len(result.missing_ids) == result.missing
    assert sum(n for _, n in result.unexpected_ids) == result.unexpected
    assert sum(n - 1 for _, n in result.duplicated_ids) == result.duplicates


def test_a_list_longer_than_its_bound_keeps_the_first_ids_and_the_whole_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reconcile_module, "IDS_KEPT", 5)
    selected = [f"e-{n:02}" for n in range(30)]
    found = [*selected[20:], *(f"x-{n:02}" for n in range(9, -1, -1)), *selected[20:]]
    for result in (tally(selected, found), tally_arrow(pa.array(selected), pa.array(found))):
        assert result.missing == 20 and result.missing_ids == tuple(selected[:5])
        assert result.unexpected == 10 and result.unexpected_ids == tuple((f"x-{n:02}", 1) for n in range(5))
        assert result.duplicates == 10 and result.duplicated_ids == tuple((i, 2) for i in selected[20:25])


@given(
    st.lists(st.one_of(st.none(), st.text(max_size=4)), max_size=60),
    st.lists(st.text(max_size=4), max_size=80),
    st.integers(min_value=1, max_value=5),
)
def test_the_drivers_arrow_comparison_is_the_reference(
    selected: list[str | None], found: list[str], pieces: int
) -> None:
    """Counts and samples alike, whatever the ids (unicode, "", nulls selected) and however the
    found ids are chunked (the follower hands them over in chunks)."""
    size = max(1, len(found) // pieces)
    chunked = pa.chunked_array(
        [pa.array(found[start : start + size], pa.string()) for start in range(0, len(found), size)],
        pa.string(),
    )

    reference = tally(["" if event_id is None else event_id for event_id in selected], found)
    assert tally_arrow(pa.array(selected, pa.string()), chunked) == reference
    # made unique first, as the driver does while the follower reads the tail
    assert tally_arrow(distinct_ids(pa.array(selected, pa.string())), chunked) == reference


@given(st.lists(ids, max_size=40, unique=True), st.randoms())
def test_tally_is_clean_exactly_when_each_selected_id_lands_once(selected: list[str], shuffler: Any) -> None:
    found = list(selected)
    shuffler.shuffle(found)
    assert (tally(selected, found).missing, tally(selected, found).duplicates) == (0, 0)
    if selected:
        assert tally(selected, found[1:]).missing == 1
        assert tally(selected, [*found, found[0]]).duplicates == 1
        assert tally(selected[1:], found).unexpected == 1


def test_chunks_cover_each_range_in_bounded_pieces() -> None:
    ranges = OffsetRanges("t", {0: (3, 10), 1: (5, 5), 2: (0, 4)})
    assert chunks(ranges, 4) == [("t", 0, 3, 7), ("t", 0, 7, 10), ("t", 2, 0, 4)]


# --- the Spark side on a topic written here ------------------------------------------------------------


def produce(bootstrap: str, topic: str, records: Sequence[tuple[str | None, str | None]]) -> None:
    """(run id header, event id header) per record; None leaves that header out."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for run_id, event_id in records:
        pairs = (("replay-run-id", run_id), ("replay-event-id", event_id))
        headers: list[tuple[str, str | bytes | None]] = [
            (name, value.encode()) for name, value in pairs if value is not None
        ]
        producer.produce(topic, b"{}", b"k", headers=headers)
    assert producer.flush(30) == 0


@pytest.mark.kafka
@pytest.mark.spark
def test_spark_reads_the_ranges_in_chunks_and_agrees_with_the_reference(
    spark: SparkSession, kafka_bootstrap: str
) -> None:
    topic, dlq = unique_topic("reconcile"), unique_topic("reconcile-dlq")
    create_topic(kafka_bootstrap, topic, partitions=2)
    create_topic(kafka_bootstrap, dlq)
    selected = [f"e-{n:02}" for n in range(30)]
    ours = [("r-1", event_id) for event_id in selected[:26]]
    records = [*ours, ("r-1", "e-03"), ("r-1", "x-extra"), ("r-2", "e-27"), (None, "e-28"), ("r-1", None)]
    produce(kafka_bootstrap, topic, records)
    produce(kafka_bootstrap, dlq, [("r-1", "e-26"), ("r-2", "e-27")])  # e-27 is another run's letter
    frame = spark.createDataFrame([(event_id,) for event_id in selected], "event_id string")
    target = ReconcileTarget("r-1", None, dlq)
    result = reconcile(
        spark,
        frame,
        kafka={"bootstrap.servers": kafka_bootstrap},
        topic=topic,
        target=target,
        chunk_records=4,
    )
    expected = tally(selected, [*selected[:26], "e-03", "x-extra", ""])
    assert {name: getattr(result, name) for name in COUNTS + SAMPLES + LISTS} == {
        name: getattr(expected, name) for name in COUNTS + SAMPLES + LISTS
    }
    assert (result.missing, result.unexpected, result.duplicates) == (4, 2, 1)
    assert result.duplicated_ids == (("e-03", 2),) and result.unexpected_ids == (("", 1), ("x-extra", 1))
    assert (result.missing_dead_lettered, result.scanned_records, result.error) == (1, len(records), None)
    on_driver = reconcile_on_driver(
        selected, kafka={"bootstrap.servers": kafka_bootstrap}, topic=topic, target=target
    )
    assert on_driver == result  # the small-run path: the same document, dead letters included


@pytest.mark.spark
def test_an_unreachable_broker_is_an_error_with_no_counts(spark: SparkSession) -> None:
    frame = spark.createDataFrame([("e-1",)], "event_id string")
    result = reconcile(
        spark,
        frame,
        kafka={"bootstrap.servers": "127.0.0.1:9"},
        topic="t",
        target=ReconcileTarget("r-1"),
        timeout_s=2,
    )
    assert result.error and all(getattr(result, name) is None for name in COUNTS)
    assert result.document()["scanned_records"] is None


# --- whole runs ----------------------------------------------------------------------------------------


def window_ids(table: Path) -> list[str]:
    dataset = ds.dataset(table, format="parquet", partitioning="hive")
    day = ds.field("dt")
    rows = dataset.to_table(filter=(day >= WINDOW[0]) & (day <= WINDOW[1]), columns=["event_id"])
    return [str(event_id) for event_id in rows.column("event_id").to_pylist()]


def run_ids(messages: list[Message], run_id: str) -> list[str]:
    """The event ids of the records carrying ``run_id``'s header: what reconcile should find."""
    found = []
    for message in messages:
        headers = headers_of(message)
        if headers.get("replay-run-id") == run_id.encode():
            found.append(headers.get("replay-event-id", b"").decode())
    return found


def run_job(spark: SparkSession, directory: Path, document: dict[str, Any]) -> dict[str, Any]:
    """Run the job's entry point in-process; its result document, as written to ``result_uri``."""
    result = directory / f"{document['run_id']}.result.json"
    document = {**document, "result_uri": result.as_uri()}
    code = job_main.main([str(write_spec(directory, document))], spark=spark)
    outcome: dict[str, Any] = json.loads(result.read_text())
    assert code == 0, outcome
    return outcome


@pytest.fixture(scope="module")
def published(
    spark: SparkSession, sample_table: Path, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(spec document, result document) of one clean replay of the window onto a 2-partition topic."""
    topic = unique_topic("replay-reconciled")
    create_topic(kafka_bootstrap, topic, partitions=2)
    document = job_spec(sample_table, kafka_bootstrap, topic)
    return document, run_job(spark, tmp_path_factory.mktemp("reconciled"), document)


@pytest.mark.kafka
@pytest.mark.spark
def test_a_clean_run_reconciles_to_nothing_missing_unexpected_or_duplicated(
    published: tuple[dict[str, Any], dict[str, Any]], sample_table: Path, kafka_bootstrap: str
) -> None:
    document, result = published
    reconciled = result["reconcile"]
    assert {name: reconciled[name] for name in COUNTS} == {
        "selected": 900,
        "found": 900,
        "missing": 0,
        "unexpected": 0,
        "duplicates": 0,
    }
    assert all(reconciled[name] == [] for name in SAMPLES)
    assert (reconciled["missing_dead_lettered"], reconciled["scanned_records"], reconciled["error"]) == (
        None,
        900,
        None,
    )
    ranges = result["offsets"]["partitions"]
    within = [
        message
        for message in consume_all(kafka_bootstrap, document["topic"])
        if message.offset() < ranges[str(message.partition())][1]  # the run's records, not later ones
    ]
    reference = tally(window_ids(sample_table), run_ids(within, document["run_id"]))
    assert reconciled == reference.document() | {"scanned_records": 900}


@pytest.mark.kafka
@pytest.mark.spark
def test_a_small_run_reconciled_on_the_driver_matches_the_spark_path(
    published: tuple[dict[str, Any], dict[str, Any]],
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
) -> None:
    """The run above was small, so its document came from the driver path; Spark's says the same."""
    document, result = published
    ranges = result["offsets"]
    target = ReconcileTarget(
        document["run_id"],
        OffsetRanges(ranges["topic"], {int(p): (lo, hi) for p, (lo, hi) in ranges["partitions"].items()}),
    )
    kafka = {"bootstrap.servers": kafka_bootstrap}
    ids = window_ids(sample_table)
    frame = spark.createDataFrame([(event_id,) for event_id in ids], "event_id string")
    in_spark = reconcile(spark, frame, kafka=kafka, topic=document["topic"], target=target)
    on_driver = reconcile_on_driver(ids, kafka=kafka, topic=document["topic"], target=target)
    assert in_spark == on_driver
    assert in_spark.document() == result["reconcile"]


@pytest.mark.kafka
@pytest.mark.spark
def test_reconcile_only_shows_records_injected_with_the_runs_header_as_unexpected(
    published: tuple[dict[str, Any], dict[str, Any]],
    spark: SparkSession,
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    document, result = published
    topic, run_id = document["topic"], document["run_id"]
    one_of_ours = sorted(window_ids(sample_table))[0]
    injected = [
        (run_id, "zz-injected-1"),
        (run_id, "zz-injected-2"),
        (run_id, one_of_ours),
        ("r-other", "zz-3"),
    ]
    produce(kafka_bootstrap, topic, injected)
    ends = {p: hi for p, (_, hi) in watermarks({"bootstrap.servers": kafka_bootstrap}, topic).items()}
    grown = {p: [lo, ends[int(p)]] for p, (lo, _) in result["offsets"]["partitions"].items()}

    def reconcile_only(offsets: dict[str, Any] | None) -> dict[str, Any]:
        section = {"run_id": run_id, "offsets": offsets, "dlq_topic": None}
        spec = {**document, "run_id": f"{run_id}-check", "mode": "reconcile", "reconcile": section}
        outcome = run_job(spark, tmp_path, spec)
        assert (outcome["status"], outcome["mode"], outcome["run_id"]) == (
            "succeeded",
            "reconcile",
            spec["run_id"],
        )
        reconciled: dict[str, Any] = outcome["reconcile"]
        return reconciled

    widened = reconcile_only({"topic": topic, "partitions": grown})
    assert (widened["unexpected"], widened["unexpected_sample"]) == (2, ["zz-injected-1", "zz-injected-2"])
    assert (widened["duplicates"], widened["duplicates_sample"], widened["missing"]) == (1, [one_of_ours], 0)
    assert (widened["found"], widened["scanned_records"]) == (903, 904)
    reference = tally(window_ids(sample_table), run_ids(consume_all(kafka_bootstrap, topic), run_id))
    assert widened == reference.document() | {"scanned_records": 904}
    assert reconcile_only(None) == widened  # no offsets: the whole topic
    as_published = reconcile_only(result["offsets"])  # the run's own ranges end before the injection
    assert as_published == result["reconcile"]


def test_the_daemon_pages_at_most_what_the_job_lists() -> None:
    assert LISTED_AT_MOST == IDS_KEPT
