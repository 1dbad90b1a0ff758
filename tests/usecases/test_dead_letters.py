"""``on_error`` from the command to the job spec, and the dead-lettered count from the run to each view.

One option for every entry point (the grammar, the API bodies, schedules), a default per source
in the catalog, and one rule for showing the count: a reported count is shown, an unknown one never
as 0. The end-to-end path is in ``test_daemon_dead_letters`` and ``test_spark_dead_letters``.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from daemon.cli.main import describe_run
from daemon.config.settings import load_settings
from daemon.contract.models import ReplayBody, RunOut, ScheduleBody
from daemon.core.grammar import (
    GrammarError,
    ReplayCommand,
    ReplaySpec,
    ScheduleCommand,
    help_text,
    parse,
    render,
)
from daemon.core.states import RunKind, RunState
from daemon.slack.run_messages import final_reply, next_step, run_parent
from daemon.usecases.catalog import Catalog, Source
from daemon.usecases.job_specs import build_spec
from scripts.devtools.sample_table import write_sample_table
from spark_job.errors import SpecError
from spark_job.spec.parse import spec_from_dict
from tests.fixtures.store_rows import unsaved_day_run

# --- one option for every entry point ------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "orders last=6h on_error=dlq",
        "plan orders 2024-01-01..2024-01-02 on_error=fail",
        "schedule orders every=1h watermark=updated_at on_error=dlq",
    ],
)
def test_on_error_parses_renders_and_parses_back(text: str) -> None:
    command = parse(text)
    assert isinstance(command, ReplaySpec | ScheduleCommand) and command.on_error is not None
    assert render(command) == text
    assert parse(render(command)) == command


def test_on_error_is_unset_unless_given_so_the_source_decides() -> None:
    replay = parse("orders last=6h")
    schedule = parse("schedule orders every=1h watermark=updated_at")
    assert isinstance(replay, ReplayCommand) and isinstance(schedule, ScheduleCommand)
    assert (replay.on_error, schedule.on_error) == (None, None)


def test_an_unknown_on_error_is_refused_naming_the_token() -> None:
    with pytest.raises(GrammarError) as caught:
        parse("orders last=6h on_error=skip")
    assert (caught.value.token, caught.value.reason) == ("on_error=skip", "must be one of fail, dlq")


def test_help_shows_on_error_for_replay_plan_and_schedule() -> None:
    lines = [line for line in help_text().splitlines() if "on_error=fail|dlq" in line]
    assert len(lines) == 3


def test_the_api_bodies_carry_on_error_both_ways() -> None:
    replay = parse("orders 2024-01-01..2024-01-02 on_error=dlq")
    schedule = parse("schedule orders every=1h watermark=updated_at on_error=fail")
    assert isinstance(replay, ReplayCommand) and isinstance(schedule, ScheduleCommand)
    assert ReplayBody.of(replay).on_error == "dlq"
    assert ReplayBody.of(replay).command(ReplayCommand) == replay
    assert ScheduleBody.of(schedule).command() == schedule
    with pytest.raises(ValueError, match="on_error"):
        ReplayBody.model_validate({"source": "orders", "window": "last=6h", "on_error": "skip"})


# --- the job spec --------------------------------------------------------------------------------


def _document(**extra: Any) -> dict[str, Any]:
    return {
        "run_id": "r-1",
        "source": {"name": "orders", "path": "lake/orders"},
        "window": {"column": "dt", "start_day": "2024-01-01", "end_day": "2024-01-02"},
        "topic": "replay.orders.r-1",
        "kafka": {"bootstrap.servers": "b:9092"},
        "tps": 0,
        "key_column": "order_id",
        "event_id_column": "event_id",
        "event_time_column": "updated_at",
        **extra,
    }


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"on_error": "skip"}, "on_error"),
        ({"on_error": "dlq"}, "dlq_topic"),
        ({"on_error": "dlq", "dlq_topic": "replay.orders.r-1"}, "dlq_topic"),
        ({"on_error": "dlq", "dlq_topic": "replay.dlq.orders", "dlq_retention_ms": 0}, "dlq_retention_ms"),
    ],
)
def test_the_specs_on_error_is_validated(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_dict(_document(**extra))
    assert caught.value.field == field


def test_the_spec_defaults_to_fail() -> None:
    spec = spec_from_dict(_document())
    assert (spec.on_error, spec.dlq_topic) == ("fail", None)


def _catalog(table: Path, **source: Any) -> Catalog:
    body = {
        "name": "orders",
        "table": {"path": str(table)},
        "partition_column": "dt",
        "event_time_column": "updated_at",
        "key_column": "order_id",
        "event_id_column": "event_id",
        "owners": ["U024BE7LH"],
        **source,
    }
    return Catalog(path="sources.yaml", sources={"orders": Source.model_validate(body)})


@pytest.mark.parametrize(
    ("source_default", "options", "expected"),
    [
        ("fail", {}, ("fail", None)),
        ("dlq", {}, ("dlq", "replay.dlq.orders")),  # a run recorded without one takes the source's
        ("dlq", {"on_error": "fail"}, ("fail", None)),
        ("fail", {"on_error": "dlq", "dlq_topic": "replay.dlq.orders"}, ("dlq", "replay.dlq.orders")),
    ],
)
def test_the_run_decides_else_the_source(
    tmp_path: Path, source_default: str, options: dict[str, Any], expected: tuple[str, str | None]
) -> None:
    write_sample_table(tmp_path / "orders", date(2024, 1, 1), 1, 3)
    catalog = _catalog(tmp_path / "orders", on_error=source_default)
    spec = build_spec(
        unsaved_day_run(**options), catalog=catalog, settings=load_settings({}), result_uri=None
    )
    assert (spec.on_error, spec.dlq_topic) == expected


@pytest.mark.parametrize(
    ("retention_ms", "ttl_hours", "expected_ms"),
    [
        (7 * 24 * 3_600_000, 168.0, 7 * 24 * 3_600_000),  # the defaults agree
        (7 * 24 * 3_600_000, 2.0, 2 * 3_600_000),  # a short ttl bounds every dead letter
        (3_600_000, 168.0, 3_600_000),  # and so does a short retention
    ],
)
def test_a_dead_letter_is_kept_the_platforms_retention_and_never_beyond_the_ttl(
    tmp_path: Path, retention_ms: int, ttl_hours: float, expected_ms: int
) -> None:
    write_sample_table(tmp_path / "orders", date(2024, 1, 1), 1, 3)
    settings = load_settings(
        {"REPLAY_TOPIC_RETENTION_MS": str(retention_ms), "REPLAY_REPLAY_TOPIC_TTL_HOURS": str(ttl_hours)}
    )
    spec = build_spec(
        unsaved_day_run(on_error="dlq", dlq_topic="replay.dlq.orders"),
        catalog=_catalog(tmp_path / "orders"),
        settings=settings,
        result_uri=None,
    )
    assert spec.dlq_retention_ms == expected_ms
    assert spec_from_dict(json.loads(spec.to_json())).dlq_retention_ms == expected_ms


def test_the_catalog_refuses_an_unknown_on_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="on_error"):
        _catalog(tmp_path, on_error="skip")


# --- the count, shown ----------------------------------------------------------------------------


def _run_out(**fields: Any) -> RunOut:
    base: dict[str, Any] = {
        "id": "r-0123456789ab",
        "kind": RunKind.REPLAY,
        "state": RunState.SUCCEEDED,
        "source": "orders",
        "window": "2024-01-01..2024-01-02",
        "topic": "replay.orders.r-0123456789ab",
        "tps": 100,
        "requester": "U024BE7LH",
        "rows_planned": 600,
        "rows_selected": 600,
        "confirmed": 597,
        "achieved_tps": 99.5,
        "failed_tasks": 0,
        "duplicates": 0,
        "failure_reason": None,
        "created_at": datetime(2024, 1, 3, tzinfo=UTC),
        "started_at": datetime(2024, 1, 3, tzinfo=UTC),
        "ended_at": datetime(2024, 1, 3, 0, 0, 6, tzinfo=UTC),
        "slack_channel": None,
        "slack_ts": None,
    }
    return RunOut.model_validate({**base, **fields})


def test_a_dead_lettered_count_is_shown_in_the_thread_and_the_cli() -> None:
    run = _run_out(dead_lettered=3, dlq_topic="replay.dlq.orders")
    reply = final_reply(run).text
    assert "597" in reply and "3 set aside in `replay.dlq.orders` (dlq=3)" in reply
    shown = dict(_fields(run_parent(run).blocks))
    assert shown["Confirmed by the broker"] == "597 (of 600 selected); dlq=3 set aside"
    assert describe_run(run).endswith(", dlq=3 set aside in replay.dlq.orders")


@pytest.mark.parametrize("dead_lettered", [None, 0])
def test_an_unknown_or_zero_count_says_nothing(dead_lettered: int | None) -> None:
    run = _run_out(confirmed=600, dead_lettered=dead_lettered)
    assert "set aside" not in final_reply(run).text
    assert "dlq" not in describe_run(run)
    shown = dict(_fields(run_parent(run).blocks))
    assert shown["Confirmed by the broker"] == "600 (of 600 selected)"


def test_a_run_failed_by_a_bad_record_suggests_on_error_dlq() -> None:
    reason = (
        "event 'e-1' cannot be published to topic 't': Broker: Message size too large (MSG_SIZE_TOO_LARGE)"
    )
    run = _run_out(state=RunState.FAILED, confirmed=10, failure_reason=reason)
    assert "on_error=dlq" in next_step(run)
    assert "on_error=dlq" in final_reply(run).text


def _fields(blocks: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(label, value) of every Block Kit field: ``*Label*\\nvalue``."""
    pairs = []
    for block in blocks:
        for field in block.get("fields", ()):
            label, _, value = field["text"].partition("\n")
            pairs.append((label.strip("*"), value))
    return pairs
