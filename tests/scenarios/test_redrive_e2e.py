"""`redrive r-…` through `replayd`: dead letters go back to the topic they were meant for once the
cause is fixed, each once.

A real daemon (SQLite, the session's broker, local Spark) replays a day into the source's live topic,
whose `max.message.bytes` is smaller than three of the day's records: the broker refuses them and,
with `on_error=dlq`, they are set aside. A redrive before the cause is fixed sets them aside again,
with the broker's new refusal. Once the topic takes them, a redrive lands exactly those three, marked
`replay-redrive-of`, and reconciles clean; a further redrive sends nothing (they already landed).
The truth is the live topic's own records and pyarrow over the table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.contract.models import RepairBody, ReplayBody
from daemon.core.errors import BadRequest, Conflict
from tests.fixtures.big_rows import limit_message_bytes, with_big_rows
from tests.fixtures.daemon import OWNER, running_daemon
from tests.fixtures.kafka import consume_all, headers_of, value_of
from tests.fixtures.runs import TERMINAL, wait_for, window_event_ids

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

DAY = "2024-01-05"


def test_dead_letters_go_back_once_the_cause_is_fixed_each_once(
    kafka_bootstrap: str, sample_table: Path, tmp_path: Path
) -> None:
    big = with_big_rows(sample_table, tmp_path / "orders", DAY)
    daemon = running_daemon(
        tmp_path,
        sample_table=tmp_path / "orders",
        bootstrap=kafka_bootstrap,
        source_extra={"on_error": "dlq"},
    )
    try:
        client = daemon.client()
        live = client.sources(OWNER)[0].live_topic
        assert live is not None
        limit_message_bytes(kafka_bootstrap, live, 10_000)
        body = ReplayBody(source="orders", window=DAY, tps=2000, topic="live", confirm_live=True)
        run = wait_for(client, client.create_replay(OWNER, body).id, TERMINAL)
        assert run.state == "succeeded" and run.dead_lettered == len(big), run
        with pytest.raises(Conflict, match="explicit confirmation"):
            client.redrive(OWNER, run.id, RepairBody())

        again = wait_for(client, client.redrive(OWNER, run.id, RepairBody(confirm_live=True)).id, TERMINAL)
        assert again.redrive_of == run.id and again.rows_planned == len(big)
        assert again.state == "succeeded" and (again.confirmed, again.dead_lettered) == (0, len(big)), again

        limit_message_bytes(kafka_bootstrap, live, 1_048_588)  # the cause, fixed
        fixed = wait_for(client, client.redrive(OWNER, run.id, RepairBody(confirm_live=True)).id, TERMINAL)
        assert fixed.state == "succeeded" and (fixed.confirmed, fixed.dead_lettered) == (len(big), 0), fixed
        assert fixed.reconcile is not None and fixed.reconcile.verdict().clean, fixed.reconcile

        records = consume_all(kafka_bootstrap, live)
        redriven = [m for m in records if headers_of(m)["replay-run-id"] == fixed.id.encode()]
        assert {json.loads(value_of(m))["event_id"] for m in redriven} == big and len(redriven) == len(big)
        assert {headers_of(m)["replay-redrive-of"] for m in redriven} == {run.id.encode()}
        assert not [m for m in redriven if "replay-error" in headers_of(m)]
        ours = [m for m in records if headers_of(m)["replay-run-id"] in (run.id.encode(), fixed.id.encode())]
        assert sorted(json.loads(value_of(m))["event_id"] for m in ours) == sorted(
            window_event_ids(tmp_path / "orders", DAY, DAY)
        )

        last = wait_for(client, client.redrive(OWNER, run.id, RepairBody(confirm_live=True)).id, TERMINAL)
        assert last.state == "succeeded" and last.confirmed == 0, last  # all landed: nothing to send
        with pytest.raises(BadRequest, match=f"is a redrive of {run.id}"):
            client.redrive(OWNER, fixed.id, RepairBody(confirm_live=True))
    finally:
        daemon.stop()
