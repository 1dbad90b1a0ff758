"""The job spec: one JSON document, round-tripped exactly, refused with the field's name when wrong."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_job.errors import SpecError
from spark_job.spec.model import (
    CommitRange,
    Control,
    DayWindow,
    JobSpec,
    OffsetRanges,
    Progress,
    RateChange,
    ReconcileTarget,
    Source,
    TimeWindow,
    WatermarkRange,
    provenance_headers,
    record_headers,
)
from spark_job.spec.parse import load_spec, spec_from_dict, spec_from_json


def document(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "run_id": "r-42",
        "source": {"name": "orders", "path": "s3://lake/orders", "format": "parquet"},
        "window": {"column": "dt", "start_day": "2024-01-01", "end_day": "2024-01-07"},
        "topic": "replay.orders.r-42",
        "kafka": {"bootstrap.servers": "broker:9092"},
        "tps": 1000,
        "key_column": "order_id",
        "event_id_column": "event_id",
        "event_time_column": "updated_at",
    }
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not None}


def test_minimal_document_gets_the_documented_defaults() -> None:
    spec = spec_from_dict(document())
    assert spec.selection == DayWindow("dt", date(2024, 1, 1), date(2024, 1, 7))
    assert (spec.value_format, spec.ordering, spec.headers) == ("json", "entity", {})
    assert spec.progress == Progress(topic="replay.progress", interval_s=10.0)
    assert spec.result_uri is None


def test_time_window_is_read_as_half_open_utc_range() -> None:
    window = {"column": "updated_at", "start": "2024-01-01T00:00:00Z", "end": "2024-01-02T06:00:00"}
    spec = spec_from_dict(document(window=window))
    assert spec.selection == TimeWindow(
        "updated_at", datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 2, 6, tzinfo=UTC)
    )


def test_watermark_low_may_be_null() -> None:
    spec = spec_from_dict(document(window=None, watermark={"column": "updated_at", "low": None, "high": 17}))
    assert spec.selection == WatermarkRange("updated_at", None, 17)


SPECS = st.builds(
    JobSpec,
    run_id=st.text(min_size=1, max_size=12).filter(str.strip),
    source=st.builds(
        Source,
        name=st.just("orders"),
        path=st.just("/lake/orders"),
        files=st.none()
        | st.lists(
            st.from_regex(r"dt=2024-01-0[1-9]/part-[0-9]{3}\.parquet", fullmatch=True), max_size=3
        ).map(tuple),
    )
    | st.builds(
        Source,
        name=st.just("orders"),
        path=st.just("/lake/orders"),
        format=st.sampled_from(["iceberg", "delta"]),
        snapshot=st.none() | st.integers(0, 2**63 - 1).map(str),
    ),
    selection=st.one_of(
        st.builds(DayWindow, st.just("dt"), st.just(date(2024, 1, 1)), st.dates(min_value=date(2024, 1, 1))),
        st.builds(
            TimeWindow,
            st.just("ts"),
            st.just(datetime(2024, 1, 1, tzinfo=UTC)),
            st.datetimes(min_value=datetime(2024, 1, 2), timezones=st.just(UTC)),
        ),
        st.builds(
            WatermarkRange,
            st.just("ts"),
            st.none() | st.integers() | st.text(max_size=5),
            st.none() | st.integers() | st.text(max_size=5),
        ),
    ),
    topic=st.just("t"),
    kafka=st.just({"bootstrap.servers": "b:9092", "security.protocol": "SSL", "linger.ms": 20}),
    tps=st.integers(0, 10**7),
    key_column=st.just("k"),
    event_id_column=st.just("id"),
    event_time_column=st.just("ts"),
    headers=st.dictionaries(st.sampled_from(["team", "reason", "ticket"]), st.text(max_size=8)),
    ordering=st.sampled_from(["entity", "none"]),
    progress=st.builds(Progress, st.just("replay.progress"), st.floats(0.5, 60)),
    result_uri=st.none() | st.just("s3://bucket/r.json"),
    max_partition_multiple=st.none() | st.integers(1, 64),
)


@given(SPECS)
def test_json_round_trip_is_exact(spec: JobSpec) -> None:
    assert spec_from_json(spec.to_json()) == spec


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"tps": -1}, "tps"),
        ({"topic": None}, "topic"),
        ({"tps": "fast"}, "tps"),
        ({"tps": True}, "tps"),
        ({"tsp": 10}, "tsp"),
        ({"watermark": {"column": "updated_at"}}, "window"),
        ({"window": None}, "window"),
        ({"window": {"column": "dt", "start_day": "2024-01-07", "end_day": "2024-01-01"}}, "window.end_day"),
        ({"window": {"column": "dt", "start_day": "yesterday", "end_day": "2024-01-01"}}, "window.start_day"),
        (
            {"window": {"column": "ts", "start": "2024-01-02T00:00:00", "end": "2024-01-01T00:00:00"}},
            "window.end",
        ),
        (
            {"window": {"column": "dt", "start_day": "2024-01-01", "end_day": "2024-01-02", "x": 1}},
            "window.x",
        ),
        ({"source": {"name": "orders", "path": "/p", "table": "db.t"}}, "source.path"),
        ({"source": {"name": "orders", "path": "/p", "format": "csv"}}, "source.format"),
        ({"source": {"name": "orders", "path": "/p", "snapshot": "12"}}, "source.snapshot"),  # Parquet
        (
            {"source": {"name": "orders", "path": "/p", "format": "delta", "snapshot": "v12"}},
            "source.snapshot",
        ),
        (
            {"source": {"name": "orders", "path": "/p", "format": "delta", "files": ["a.parquet"]}},
            "source.files",
        ),
        ({"source": {"name": "orders", "path": "/p", "files": ["dt=2024-01-01/../../etc"]}}, "source.files"),
        ({"source": {"name": "orders", "path": "/p", "files": ["/abs.parquet"]}}, "source.files"),
        ({"source": {"name": "orders", "path": "/p", "files": [7]}}, "source.files"),
        ({"kafka": {}}, "kafka.bootstrap.servers"),
        ({"kafka": {"bootstrap.servers": "b:1", "enable.idempotence": False}}, "kafka.enable.idempotence"),
        ({"kafka": {"bootstrap.servers": "b:1", "acks": "1"}}, "kafka.acks"),
        ({"value_format": "raw"}, "value_column"),
        ({"value_format": "avro"}, "value_format"),
        ({"ordering": "entity", "event_time_column": None}, "event_time_column"),
        ({"ordering": "random"}, "ordering"),
        ({"headers": {"replay-run-id": "spoofed"}}, "headers.replay-run-id"),
        ({"headers": {"team": 7}}, "headers.team"),
        ({"progress": {"interval_s": 0}}, "progress.interval_s"),
        ({"max_partition_multiple": 0}, "max_partition_multiple"),
        ({"_test_fail_once_after": 5}, "_test_fail_once_after"),  # no test hooks in the product
        ({"headers": {"replay-event-id": "e-1"}}, "headers.replay-event-id"),
        ({"mode": "audit"}, "mode"),
        ({"delivery": "exactly-once"}, "delivery"),
        ({"executor": {"cores": 0}}, "executor.cores"),
        ({"executor": {"memory": "lots"}}, "executor.memory"),
        ({"executor": {"memory": "4g", "disk": "1t"}}, "executor.disk"),
        ({"delivery": "transactional", "on_error": "dlq", "dlq_topic": "d"}, "delivery"),
        ({"mode": "reconcile"}, "reconcile"),
        ({"reconcile": {"run_id": "r-41"}}, "reconcile"),
        ({"mode": "reconcile", "reconcile": {"offsets": None}}, "reconcile.run_id"),
        (
            {
                "mode": "reconcile",
                "reconcile": {"run_id": "r-41", "offsets": {"topic": "t", "partitions": {"0": [5]}}},
            },
            "reconcile.offsets.partitions.0",
        ),
        (
            {
                "mode": "reconcile",
                "reconcile": {"run_id": "r-41", "offsets": {"topic": "t", "partitions": {"0": [9, 5]}}},
            },
            "reconcile.offsets.partitions.0",
        ),
    ],
)
def test_invalid_documents_name_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError, match=f"'{field}'") as raised:
        spec_from_dict(document(**overrides))
    assert raised.value.field == field


def test_a_reconcile_spec_names_the_run_and_its_offset_ranges() -> None:
    section = {
        "run_id": "r-41",
        "offsets": {"topic": "t", "partitions": {"0": [3, 9], "2": [0, 4]}},
        "dlq_topic": "d",
    }
    spec = spec_from_dict(document(mode="reconcile", reconcile=section))
    assert spec.reconcile == ReconcileTarget("r-41", OffsetRanges("t", {0: (3, 9), 2: (0, 4)}), "d")
    assert spec.to_dict()["reconcile"] == section
    assert spec_from_json(spec.to_json()) == spec
    whole_topic = spec_from_dict(document(mode="reconcile", reconcile={"run_id": "r-41"}))
    assert whole_topic.reconcile == ReconcileTarget("r-41")


def test_a_replay_spec_is_written_as_before() -> None:
    spec = spec_from_dict(document())
    assert spec.mode == "replay" and spec.reconcile is None
    assert "mode" not in spec.to_dict() and "reconcile" not in spec.to_dict()


def test_not_json_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="not valid JSON"):
        spec_from_json("{run_id: r-1")


def test_load_spec_reads_paths_and_file_uris(tmp_path: Path) -> None:
    path = tmp_path / "spec with space.json"
    path.write_text(json.dumps(document()))
    assert load_spec(str(path)) == load_spec(path.as_uri()) == spec_from_dict(document())


def test_missing_spec_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(str(tmp_path / "absent.json"))


def test_records_carry_user_and_provenance_headers() -> None:
    spec = spec_from_dict(document(headers={"team": "payments"}))
    assert provenance_headers(spec) == {
        "replay-run-id": "r-42",
        "replay-source": "orders",
        "replay-window": "dt 2024-01-01..2024-01-07",
    }
    assert ("team", b"payments") in record_headers(spec)


def test_watermark_runs_name_their_range_in_a_watermark_header() -> None:
    spec = spec_from_dict(document(window=None, watermark={"column": "v", "low": 10, "high": 20}))
    assert provenance_headers(spec)["replay-watermark"] == "v (10, 20]"


def test_a_commit_range_round_trips_and_names_its_commits_in_a_watermark_header() -> None:
    lake = {"name": "orders", "path": "/lake/orders", "format": "delta", "snapshot": "9"}
    spec = spec_from_dict(document(source=lake, window=None, commits={"low": "4", "high": "9"}))
    assert spec.selection == CommitRange(low="4", high="9")
    assert spec_from_json(spec.to_json()) == spec
    assert provenance_headers(spec)["replay-watermark"] == "commits (4, 9]"
    first = spec_from_dict(document(source=lake, window=None, commits={"high": "9"}))
    assert first.selection == CommitRange(low=None, high="9")


@pytest.mark.parametrize(
    ("source", "commits", "field"),
    [
        ({"format": "parquet"}, {"low": "1", "high": "2"}, "commits"),  # Parquet has no commits
        ({"format": "iceberg", "snapshot": "3"}, {"low": "1", "high": "2"}, "commits.high"),  # not pinned
        ({"format": "iceberg", "snapshot": "2"}, {"low": "one", "high": "2"}, "commits"),
    ],
)
def test_a_commit_range_reads_the_snapshot_the_run_pins(
    source: dict[str, str], commits: dict[str, str], field: str
) -> None:
    lake = {"name": "orders", "path": "/lake/orders", **source}
    with pytest.raises(SpecError) as caught:
        spec_from_dict(document(source=lake, window=None, commits=commits))
    assert caught.value.field == field


def test_a_control_section_round_trips_and_is_absent_when_unused() -> None:
    changes = [{"at": 1.5, "tps": 300, "paused": True}]
    section = {"topic": "replay.control", "offset": 17, "changes": changes, "key": "ab" * 32}
    spec = spec_from_dict(document(control=section))
    assert spec.control == Control("replay.control", 17, (RateChange(1.5, 300, paused=True),), key="ab" * 32)
    assert spec_from_json(spec.to_json()) == spec
    assert "control" not in spec_from_dict(document()).to_dict()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"control": {"topic": "c", "offset": -1}}, "control.offset"),
        ({"control": {"topic": "c", "offset": 0, "changes": [{"at": 1, "tps": 0}]}}, "control.changes.0.tps"),
        (
            {"control": {"topic": "c", "offset": 0, "changes": [{"at": 2, "tps": 5}, {"at": 1, "tps": 5}]}},
            "control.changes.1.at",
        ),
        (
            {"control": {"topic": "c", "offset": 0, "changes": [{"at": 1, "tps": 5, "x": 1}]}},
            "control.changes.0.x",
        ),
        ({"control": {"topic": "c", "offset": 0}, "tps": 0}, "control"),
        ({"control": {"topic": "c", "offset": 0, "key": "not-hex"}}, "control.key"),
        ({"control": {"topic": "c", "offset": 0, "key": "AB" * 32}}, "control.key"),
    ],
)
def test_a_bad_control_section_names_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as raised:
        spec_from_dict(document(**overrides))
    assert raised.value.field == field
