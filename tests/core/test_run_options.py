"""A run's options are one typed value: encoded and decoded losslessly, refused when damaged, and runs
stored before they were typed (free-form options, facts guessed from strings) are upgraded once."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.auto_rate import AutoRate
from daemon.core.run_options import VERSION, PipelineOptions, RunOptions, WindowKind
from daemon.core.states import FailureKind
from store import Store
from store.db import create_store_engine
from store.migrate import upgrade

_text = st.text(min_size=1, max_size=12)
_options = st.builds(
    RunOptions,
    window=st.sampled_from(WindowKind),
    relative=st.booleans(),
    topic_mode=st.sampled_from(["auto", "live"]),
    headers=st.dictionaries(_text, _text, max_size=3),
    ordering=st.sampled_from(["entity", "none"]),
    timestamp=st.sampled_from([None, "event", "replay"]),
    workers=st.integers(1, 64),
    partitions=st.none() | st.integers(0, 1000),
    planned_rows=st.none() | st.integers(0, 10**12),
    planned_eta_s=st.none() | st.floats(0, 1e7, allow_nan=False),
    request=st.none() | _text,
    watch=st.lists(_text, max_size=3).map(tuple),
    auto=st.none() | st.builds(AutoRate, st.integers(1, 10**6), st.integers(1, 10**6), _text),
    overrides=st.lists(_text, max_size=3).map(tuple),
    approved_by=st.none() | _text,
)


@given(_options)
def test_what_is_encoded_decodes_to_the_same_options(options: RunOptions) -> None:
    document = json.loads(json.dumps(options.encode()))  # through JSON, as the store keeps it
    assert document["v"] == VERSION
    assert RunOptions.decode(document) == options


def test_every_default_is_in_one_place() -> None:
    decoded = RunOptions.decode({"v": VERSION})
    assert decoded == RunOptions()
    assert (decoded.workers, decoded.ordering, decoded.window, decoded.topic_mode) == (
        1,
        "entity",
        WindowKind.RANGE,
        "auto",
    )


@pytest.mark.parametrize(
    ("document", "complaint"),
    [
        ({"workers": 2}, "version None"),
        ({"v": 99}, "version 99"),
        ({"v": 1, "confirm_live": True}, "unknown run options: confirm_live"),
        ({"v": 1, "workers": 0}, "workers=0"),
        ({"v": 1, "workers": True}, "workers=True"),
        ({"v": 1, "ordering": "key"}, "ordering='key'"),
        ({"v": 1, "window": "week"}, "week"),
        ({"v": 1, "headers": {"a": 1}}, "headers"),
        ({"v": 1, "watch": "g1"}, "watch"),
        ({"v": 1, "on_error": "dlq"}, "dlq_topic"),
        ({"v": 1, "auto": {"ceiling": 5}}, "malformed"),
        ([1, 2], "an object"),
    ],
)
def test_a_damaged_document_is_refused_with_what_is_wrong(document: Any, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint.replace("(", r"\(").replace(")", r"\)")):
        RunOptions.decode(document)


def test_the_store_hands_out_typed_options(store: Store) -> None:
    options = RunOptions(
        window=WindowKind.DAYS, workers=3, watch=("billing",), auto=AutoRate(90, 10, "billing")
    )
    created = store.runs.create(kind="replay", source="s", topic="t", tps=5, requester="U1", options=options)
    assert store.runs.get(created.id).options == options
    with pytest.raises(Exception, match="expected RunOptions"):
        store.runs.create(
            kind="replay",
            source="s",
            topic="t",
            tps=5,
            requester="U1",
            options={"workers": 3},  # type: ignore[arg-type]
        )


# --- runs written before the options were typed --------------------------------------------------

_LEGACY = [
    # (id, kind, state, label, start, end, watermark column, topic, reason, handle, options)
    ("r-days", "replay", "succeeded", "2024-01-01..2024-01-07", "2024-01-01", "2024-01-08", None,
     "replay.orders.r-days", None, {"pid": 1},
     {"rows": 600, "eta_s": 12.5, "workers": 2, "ordering": "entity", "headers": {"h": "1"}}),
    ("r-last", "replay", "failed", "last=2d", "2024-01-01", "2024-01-03", None,
     "orders.live", "could not launch the job: spark-submit not found", None,
     {"on_error": "dlq", "dlq_topic": "replay.dlq.orders", "approved_by": "U2", "overrides": ["r-x"]}),
    ("r-zone", "replay", "failed", "2024-01-01..2024-01-01 tz=Europe/Paris", "2023-12-31T23:00",
     "2024-01-01T23:00", None, "replay.orders.r-zone", "job process lost (last output: x)", {"pid": 2},
     {"topic_mode": "auto", "auto": {"ceiling": 100, "lag_limit": 5, "group": "g"}, "confirm_live": True}),
    ("r-slot", "pipeline", "failed", "(a, b]", None, None, "updated_at", "replay.orders.p-1",
     "table unreadable", None, {"headers": {}, "watch": ["g"]}),
    ("r-today", "replay", "failed", "today", "2024-01-05", "2024-01-06", None, "replay.orders.r-today",
     "delivery failed: broker down", {"pid": 3}, {}),
]  # fmt: skip


_COLUMNS = (
    "id", "kind", "source", "window_label", "window_start", "window_end", "watermark_column", "target_topic",
    "topic_created", "tps", "requester", "state", "confirmed_count", "failed_tasks", "duplicates_reported",
    "failure_reason", "created_at", "updated_at", "version", "watching",
)  # fmt: skip


_PIPELINE_COLUMNS = (
    "id", "source", "schedule", "watermark_column", "lookback_seconds", "tps", "topic", "topic_created",
    "state", "created_by", "created_at", "updated_at", "version",
)  # fmt: skip


def _at(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text).replace(tzinfo=UTC)


def _insert_legacy(url: str) -> None:
    """Rows as revision 0012's daemon wrote them: free-form options, no failure kind."""
    runs = sa.table(
        "runs",
        *(sa.column(name) for name in _COLUMNS),
        sa.column("options", sa.JSON),
        sa.column("launcher_handle", sa.JSON),
    )
    now = datetime(2024, 1, 9, tzinfo=UTC)
    rows = [
        {
            "id": rid,
            "kind": kind,
            "source": "orders",
            "window_label": label,
            "window_start": _at(start),
            "window_end": _at(end),
            "watermark_column": column,
            "target_topic": topic,
            "topic_created": False,
            "tps": 10,
            "requester": "U1",
            "state": state,
            "confirmed_count": 0,
            "failed_tasks": 0,
            "duplicates_reported": 0,
            "failure_reason": reason,
            "created_at": now,
            "updated_at": now,
            "version": 1,
            "watching": False,
            "options": options,
            "launcher_handle": handle,
        }
        for rid, kind, state, label, start, end, column, topic, reason, handle, options in _LEGACY
    ]
    pipelines = sa.table(
        "pipelines",
        *(sa.column(name) for name in _PIPELINE_COLUMNS),
        sa.column("options", sa.JSON),
        sa.column("owners", sa.JSON),
    )
    pipeline = {
        "source": "orders", "schedule": "every=1h", "watermark_column": "updated_at", "lookback_seconds": 0,
        "tps": 10, "owners": ["U1"], "state": "active", "created_by": "U1", "created_at": now,
        "updated_at": now, "version": 1,
    }  # fmt: skip
    engine = create_store_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(runs.insert(), rows)
            conn.execute(
                pipelines.insert(),
                [
                    {
                        **pipeline,
                        "id": "p-made",
                        "topic": "replay.orders.p-made",
                        "topic_created": True,
                        "options": {"headers": {"h": "1"}, "watch": ["g"], "request": "schedule orders"},
                    },
                    {
                        **pipeline,
                        "id": "p-live",
                        "topic": "orders.live",
                        "topic_created": False,
                        "options": {"on_error": "dlq", "topic_mode": "live"},
                    },
                ],
            )
    finally:
        engine.dispose()


def test_runs_stored_before_typed_options_are_upgraded_once(database_url: str) -> None:
    upgrade(database_url, "0012")
    _insert_legacy(database_url)
    upgrade(database_url)
    with Store(database_url) as store:
        runs = {rid: store.runs.get(rid) for rid, *_ in _LEGACY}
    days, last, zone, slot, today = (runs[rid] for rid in ("r-days", "r-last", "r-zone", "r-slot", "r-today"))

    assert days.options == RunOptions(
        window=WindowKind.DAYS, planned_rows=600, planned_eta_s=12.5, workers=2, headers={"h": "1"}
    )
    assert (last.options.window, last.options.relative, last.options.topic_mode) == (
        WindowKind.RANGE,
        True,
        "live",
    )
    assert (last.options.on_error, last.options.approved_by, last.options.overrides) == (
        "dlq",
        "U2",
        ("r-x",),
    )
    assert (zone.options.window, zone.options.relative, zone.options.auto) == (
        WindowKind.RANGE,
        True,
        AutoRate(100, 5, "g"),
    )
    assert (slot.options.window, slot.options.watch) == (WindowKind.WATERMARK, ("g",))
    assert (today.options.window, today.options.relative) == (WindowKind.DAYS, True)
    assert days.failure_kind is None
    with Store(database_url) as store:
        made, live = store.pipelines.get("p-made"), store.pipelines.get("p-live")
    assert made.options == PipelineOptions(
        topic_mode="auto", headers={"h": "1"}, watch=("g",), request="schedule orders"
    )
    assert live.options == PipelineOptions(topic_mode="live", on_error="dlq")
    assert [r.failure_kind for r in (last, zone, slot, today)] == [
        FailureKind.LAUNCH,
        FailureKind.LOST,
        FailureKind.PLAN,
        FailureKind.JOB,
    ]
