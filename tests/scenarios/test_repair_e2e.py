"""`repair r-…` through `replayd`: only the ids a run's reconcile found missing are published again.

A real daemon (SQLite, the session's broker, local Spark) replays a window; then the topic loses the
first records of one partition (Kafka's DeleteRecords, as retention or an operator would), and a
`reconcile r-…` finds them missing. The repair publishes exactly those ids, each once, into the same
topic with a `replay-repair-of` header, and its verdict, the parent's selection against every record
of both runs, is clean and lands on the parent too. The truth is the topic's own id set and pyarrow
over the table. A repair of a run with nothing missing, or of a repair, is refused and creates
nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.contract.models import RepairBody, ReplayBody
from daemon.core.errors import BadRequest, Conflict
from tests.fixtures.daemon import OWNER, DaemonProcess
from tests.fixtures.kafka import consume_all, headers_of, lose_head, value_of
from tests.fixtures.runs import TERMINAL, wait_for, window_event_ids

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

LOST = 40  # records the topic loses from the head of partition 0


def test_a_repair_publishes_only_what_went_missing_and_the_verdict_is_clean_again(
    replay_daemon: DaemonProcess, kafka_bootstrap: str, sample_table: Path
) -> None:
    client = replay_daemon.client()
    created = client.create_replay(OWNER, ReplayBody(source="orders", window="2024-01-06", tps=3000))
    run = wait_for(client, created.id, TERMINAL)
    assert run.state == "succeeded" and run.reconcile is not None and run.reconcile.verdict().clean, run
    with pytest.raises(BadRequest, match="found nothing missing"):
        client.repair(OWNER, run.id, RepairBody())

    lost = lose_head(kafka_bootstrap, run.topic, LOST)
    assert len(lost) == LOST
    checking = client.reconcile(OWNER, run.id)
    wait_for(client, checking.id, TERMINAL)
    found = client.get_replay(OWNER, run.id).reconcile
    assert found is not None and found.missing == LOST, found
    listed = client.verdict_ids(OWNER, run.id, "missing")  # the whole list, not a sample of ten
    assert [line.event_id for line in listed] == sorted(lost) and {line.records for line in listed} == {0}

    repair = client.repair(OWNER, run.id, RepairBody())
    assert repair.repair_of == run.id and repair.topic == run.topic and repair.rows_planned == LOST
    repaired = wait_for(client, repair.id, TERMINAL)

    assert repaired.state == "succeeded", repaired
    assert repaired.confirmed == LOST
    records = consume_all(kafka_bootstrap, run.topic)
    again = [m for m in records if headers_of(m)["replay-run-id"] == repair.id.encode()]
    assert {json.loads(value_of(m))["event_id"] for m in again} == lost and len(again) == LOST
    assert {headers_of(m)["replay-repair-of"] for m in again} == {run.id.encode()}
    on_topic = [json.loads(value_of(m))["event_id"] for m in records]
    assert sorted(on_topic) == sorted(window_event_ids(sample_table, "2024-01-06", "2024-01-06"))
    assert repaired.reconcile is not None and repaired.reconcile.verdict().clean, repaired.reconcile
    parent = client.get_replay(OWNER, run.id).reconcile
    assert parent is not None and parent.verdict().clean and parent.found == len(on_topic), parent
    assert parent.repaired_by == repair.id

    with pytest.raises(BadRequest, match=f"is a repair of {run.id}"):
        client.repair(OWNER, repair.id, RepairBody())
    with pytest.raises(BadRequest, match="found nothing missing"):
        client.repair(OWNER, run.id, RepairBody())
    assert [r.id for r in client.list_replays(OWNER, limit=200).runs].count(repair.id) == 1


def test_a_repair_or_redrive_the_run_cannot_take_is_refused_and_creates_nothing(
    replay_daemon: DaemonProcess,
) -> None:
    client = replay_daemon.client()
    going = client.create_replay(OWNER, ReplayBody(source="orders", window="2024-01-07", tps=50))
    before = [r.id for r in client.list_replays(OWNER, limit=200).runs]

    with pytest.raises(Conflict, match=f"run {going.id} is still"):
        client.repair(OWNER, going.id, RepairBody())
    with pytest.raises(Conflict, match=f"run {going.id} is still"):
        client.redrive(OWNER, going.id, RepairBody())
    client.cancel_replay(OWNER, going.id)
    stopped = wait_for(client, going.id, TERMINAL)
    assert stopped.reconcile is None  # cancelled before its end: never reconciled
    with pytest.raises(BadRequest, match="has no reconcile to repair from"):
        client.repair(OWNER, going.id, RepairBody())
    with pytest.raises(BadRequest, match="set no records aside"):
        client.redrive(OWNER, going.id, RepairBody())

    assert [r.id for r in client.list_replays(OWNER, limit=200).runs] == before
