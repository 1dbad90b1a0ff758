"""A filtered replay (``where=``) through `replayd`: exactly the rows the filter keeps, and a verdict
on those.

A real daemon (SQLite, the session's broker, local Spark) plans, publishes and reconciles a window
of the sample table through a filter. The truth is computed apart from the product: pyarrow over
the table with the filter written by hand (not the daemon's own filter compiler, not the job's
report). A filter the table cannot answer is refused at plan time, names its token, and creates
neither a run nor a topic.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pyarrow.dataset as ds
import pytest

from daemon.contract.models import ReplayBody, ScheduleBody
from daemon.core.grammar import ReplayCommand, ScheduleCommand, parse
from daemon.slack.run_report import rerun_command
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon
from tests.fixtures.kafka import consume_all, headers_of, value_of
from tests.fixtures.runs import TERMINAL, fire_pipeline, replay_topics, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

WINDOW = "2024-01-02..2024-01-04"
TYPED = "status IN ('paid', 'shipped') and amount>250 OR currency = \u2018GBP\u2019"
CANONICAL = "status IN ('paid', 'shipped') AND amount > 250 OR currency = 'GBP'"


def _expected(table: Path) -> set[str]:
    """The window's event ids the filter keeps, by pyarrow over the table."""
    days = (ds.field("dt") >= "2024-01-02") & (ds.field("dt") <= "2024-01-04")
    kept = (ds.field("status").isin(["paid", "shipped"]) & (ds.field("amount") > 250)) | (
        ds.field("currency") == "GBP"
    )
    dataset = ds.dataset(table, format="parquet", partitioning="hive")
    return set(dataset.to_table(columns=["event_id"], filter=days & kept).column("event_id").to_pylist())


def test_a_filtered_replay_lands_exactly_the_rows_its_filter_keeps(
    replay_daemon: DaemonProcess, kafka_bootstrap: str, sample_table: Path
) -> None:
    client = replay_daemon.client()
    expected = _expected(sample_table)
    everything = len(
        ds.dataset(sample_table, format="parquet", partitioning="hive").to_table(
            filter=(ds.field("dt") >= "2024-01-02") & (ds.field("dt") <= "2024-01-04")
        )
    )
    assert 0 < len(expected) < everything / 2, "the filter keeps some rows, not most"
    command = parse(f"orders {WINDOW} tps=2000 where={TYPED}")
    assert isinstance(command, ReplayCommand)

    plan = client.plan(OWNER, ReplayBody.of(command))
    assert (plan.rows, plan.where) == (len(expected), CANONICAL)

    created = client.create_replay(OWNER, ReplayBody.of(command))
    run = wait_for(client, created.id, TERMINAL)

    assert run.state == "succeeded", run
    assert run.where == CANONICAL
    assert (run.rows_planned, run.rows_selected, run.confirmed) == (len(expected),) * 3
    landed = consume_all(kafka_bootstrap, run.topic, expected=len(expected))
    ids = [json.loads(value_of(m))["event_id"] for m in landed]
    assert len(ids) == len(set(ids)) and set(ids) == expected
    fingerprints = {headers_of(m)["replay-filter"] for m in landed}
    assert len(fingerprints) == 1 and re.fullmatch(rb"[0-9a-f]{16}", fingerprints.pop())
    assert run.reconcile is not None and run.reconcile.verdict().clean, run.reconcile
    assert run.reconcile.selected == len(expected)

    again = client.reconcile(OWNER, run.id)  # later, on demand: the same filtered selection
    wait_for(client, again.id, TERMINAL)
    checked = client.get_replay(OWNER, run.id).reconcile
    assert checked is not None and checked.on_demand and checked.verdict().clean, checked
    assert (checked.selected, checked.found) == (len(expected), len(expected))

    retry = parse(rerun_command(run).removeprefix("/replay "))  # what a failure message offers
    assert isinstance(retry, ReplayCommand) and retry.where == command.where


def test_keys_and_types_select_and_fields_project_as_pyarrow_says(
    kafka_bootstrap: str, sample_table: Path, tmp_path: Path
) -> None:
    """keys= over the key column, types= over the catalog's type_column, fields= narrowing each value."""
    keys, types = ["ord-00387", "ord-00394", "ord-00396", "ord-99999"], ["paid", "shipped"]
    dataset = ds.dataset(sample_table, format="parquet", partitioning="hive")
    kept = (ds.field("dt") == "2024-01-05") & ds.field("order_id").isin(keys) & ds.field("status").isin(types)
    expected = dataset.to_table(columns=["event_id", "order_id", "status"], filter=kept).to_pylist()
    assert expected, "the keys have paid or shipped events that day"
    daemon = running_daemon(
        tmp_path, sample_table=sample_table, bootstrap=kafka_bootstrap, source_extra={"type_column": "status"}
    )
    try:
        client = daemon.client()
        command = parse(
            f"orders 2024-01-05 tps=500 keys={','.join(keys)} types=paid,shipped fields=order_id,status"
        )
        assert isinstance(command, ReplayCommand)
        created = client.create_replay(OWNER, ReplayBody.of(command))
        run = wait_for(client, created.id, TERMINAL)

        assert run.state == "succeeded", run
        assert (
            run.where == f"order_id IN ({', '.join(repr(k) for k in keys)}) AND status IN ('paid', 'shipped')"
        )
        assert run.fields == ["order_id", "status"]
        assert run.confirmed == len(expected) and run.reconcile is not None and run.reconcile.verdict().clean
        landed = consume_all(kafka_bootstrap, run.topic, expected=len(expected))
        values = sorted((json.loads(value_of(m)) for m in landed), key=lambda v: (v["order_id"], v["status"]))
        assert values == sorted(
            ({"order_id": row["order_id"], "status": row["status"]} for row in expected),
            key=lambda v: (v["order_id"], v["status"]),
        )
        ids = {headers_of(m)["replay-event-id"].decode() for m in landed}
        assert ids == {row["event_id"] for row in expected}
    finally:
        daemon.stop()


def test_a_key_file_selects_its_entities_and_pins_them_by_digest(
    replay_daemon: DaemonProcess, kafka_bootstrap: str, sample_table: Path, tmp_path: Path
) -> None:
    keys = ["ord-00387", "ord-00394", "ord-00396"]
    listed = tmp_path / "keys.txt"
    listed.write_text("\n".join(["ord-00387", "", "  ord-00394  ", "ord-00396", "ord-00387"]) + "\n")
    dataset = ds.dataset(sample_table, format="parquet", partitioning="hive")
    kept = (ds.field("dt") == "2024-01-05") & ds.field("order_id").isin(keys)
    expected = set(dataset.to_table(columns=["event_id"], filter=kept)["event_id"].to_pylist())
    client = replay_daemon.client()
    command = parse(f"orders 2024-01-05 tps=500 keys=@{listed}")
    assert isinstance(command, ReplayCommand) and command.keys_file == str(listed)

    plan = client.plan(OWNER, ReplayBody.of(command))
    assert (plan.rows, plan.keys_file, plan.keys_count) == (len(expected), str(listed), 3)
    run = wait_for(client, client.create_replay(OWNER, ReplayBody.of(command)).id, TERMINAL)

    assert run.state == "succeeded" and run.keys_file == str(listed), run
    landed = consume_all(kafka_bootstrap, run.topic, expected=len(expected))
    assert {json.loads(value_of(m))["event_id"] for m in landed} == expected
    assert (
        run.reconcile is not None
        and run.reconcile.verdict().clean
        and run.reconcile.selected == len(expected)
    )
    assert len({headers_of(m)["replay-filter"] for m in landed}) == 1
    retry = parse(rerun_command(run).removeprefix("/replay "))
    assert isinstance(retry, ReplayCommand) and retry.keys_file == str(listed)


def test_a_filtered_pipeline_publishes_only_the_rows_its_filter_keeps(
    replay_daemon: DaemonProcess, kafka_bootstrap: str, sample_table: Path
) -> None:
    client = replay_daemon.client()
    command = parse("schedule orders every=1d watermark=updated_at tps=5000 where=currency = 'GBP'")
    assert isinstance(command, ScheduleCommand)
    pipeline = client.schedule(OWNER, ScheduleBody.of(command))
    assert pipeline.where == "currency = 'GBP'"

    slot = fire_pipeline(client, pipeline.id)

    dataset = ds.dataset(sample_table, format="parquet", partitioning="hive")
    expected = set(
        dataset.to_table(columns=["event_id"], filter=ds.field("currency") == "GBP")["event_id"].to_pylist()
    )
    assert slot.state == "succeeded" and slot.where == "currency = 'GBP'", slot
    assert slot.confirmed == len(expected) and slot.reconcile is not None and slot.reconcile.verdict().clean
    landed = consume_all(kafka_bootstrap, slot.topic, expected=len(expected))
    assert {json.loads(value_of(m))["event_id"] for m in landed} == expected
    client.unschedule(OWNER, pipeline.id, confirm=True)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("amout > 5", "orders has no column `amout`"),
        ("updated_at > 2024-01-01", "would break the pipeline's watermark"),
    ],
)
def test_a_pipeline_filter_the_table_cannot_answer_is_refused_and_creates_nothing(
    replay_daemon: DaemonProcess, kafka_bootstrap: str, where: str, message: str
) -> None:
    topics_before = replay_topics(kafka_bootstrap)
    pipelines_before = [p.id for p in replay_daemon.client().list_pipelines(OWNER)]
    body = {"source": "orders", "every": "1d", "watermark": "updated_at", "where": where}

    response = _refused(replay_daemon, body, "/v1/pipelines")

    assert response.status_code == 400 and message in response.json()["error"], response.text
    assert [p.id for p in replay_daemon.client().list_pipelines(OWNER)] == pipelines_before
    assert replay_topics(kafka_bootstrap) == topics_before


def _refused(daemon: DaemonProcess, body: dict[str, Any], path: str = "/v1/replays") -> httpx.Response:
    return httpx.post(
        f"{daemon.url}{path}",
        json=body,
        headers={"Authorization": f"Bearer {daemon.token}", "X-Replay-Actor": OWNER},
    )


@pytest.mark.parametrize(
    ("extra", "status", "message"),
    [
        ({"where": "amout > 5"}, 400, "orders has no column `amout`"),
        ({"where": "amount > 'abc'"}, 400, "`amount` holds numbers; 'abc' is text"),
        ({"where": "updated_at > 12"}, 400, "`updated_at` holds timestamps; 12 is a number"),
        ({"where": "status = paid"}, 400, "expected a value: quote text"),
        ({"where": "status in ('paid'"}, 400, "expected `)`"),
        ({"fields": ["dt"]}, 400, "orders has no column `dt`"),
        ({"keys": ["a"], "types": ["b"]}, 400, "names no type_column"),
        ({"keys": ["a"] * 2}, 400, "lists 'a' twice"),
        ({"keys_file": "/nonexistent/keys.txt"}, 503, "cannot read the key file at /nonexistent/keys.txt"),
        (
            {"where": "amount > 1000000"},
            422,
            "no rows of 'orders' in 2024-01-02..2024-01-04 that where=amount > 1000000",
        ),
    ],
)
@pytest.mark.parametrize("path", ["/v1/replays", "/v1/plans"])
def test_a_filter_the_table_cannot_answer_is_refused_and_creates_nothing(
    replay_daemon: DaemonProcess,
    kafka_bootstrap: str,
    extra: dict[str, Any],
    status: int,
    message: str,
    path: str,
) -> None:
    topics_before = replay_topics(kafka_bootstrap)
    runs_before = [r.id for r in replay_daemon.client().list_replays(OWNER).runs]

    response = _refused(replay_daemon, {"source": "orders", "window": WINDOW, "tps": 100, **extra}, path)

    assert response.status_code == status, response.text
    assert message in response.json()["error"]
    assert [r.id for r in replay_daemon.client().list_replays(OWNER).runs] == runs_before
    assert replay_topics(kafka_bootstrap) == topics_before
