"""Erasures honoured through `replayd`: a source names a list of erased customers, and no replay or
pipeline run of it publishes their events.

A real daemon (SQLite, the session's broker, local Spark) on the sample table, whose catalog entry
names a CSV of erased customer ids. The truth is pyarrow over the table less the listed customers,
not the job's own count. The plan says what the list will leave out; the run publishes exactly the
rest, reports "suppressed N (erasure list as of T)", reconciles clean and leaves an audit entry
naming the list and its version; a reconcile asked after a later erasure still checks the version
the run honoured. A pipeline's run honours the list too. A list that cannot be read refuses the
replay and creates nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pyarrow.dataset as ds
import pytest

from daemon.contract.models import ReplayBody, ScheduleBody
from daemon.slack.run_report import report_line
from tests.fixtures.daemon import OWNER, running_daemon
from tests.fixtures.kafka import consume_all, headers_of, value_of
from tests.fixtures.runs import TERMINAL, daemon_store, fire_pipeline, replay_topics, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

WINDOW = "2024-01-03..2024-01-04"


def _rows(table: Path, first: str | None = None, last: str | None = None) -> list[dict[str, str]]:
    dataset = ds.dataset(table, format="parquet", partitioning="hive")
    window = None if first is None else (ds.field("dt") >= first) & (ds.field("dt") <= last)
    rows: list[dict[str, str]] = dataset.to_table(
        columns=["event_id", "customer_id"], filter=window
    ).to_pylist()
    return rows


def test_no_run_publishes_an_erased_customers_events(
    kafka_bootstrap: str, sample_table: Path, tmp_path: Path
) -> None:
    rows = _rows(sample_table, "2024-01-03", "2024-01-04")
    by_customer: dict[str, int] = {}
    for row in rows:
        by_customer[row["customer_id"]] = by_customer.get(row["customer_id"], 0) + 1
    first, second, later = sorted(by_customer, key=lambda c: -by_customer[c])[:3]
    listed = tmp_path / "erasures.csv"
    listed.write_text(f"customer_id,erased_at\n{first},2024-05-01T10:00:00Z\n{second},2024-05-02T09:30:00Z\n")
    erasures = {"path": str(listed), "format": "csv", "column": "customer_id", "key": "customer_id"}
    daemon = running_daemon(
        tmp_path, sample_table=sample_table, bootstrap=kafka_bootstrap, source_extra={"erasures": erasures}
    )
    try:
        client = daemon.client()
        body = ReplayBody(source="orders", window=WINDOW, tps=2000)
        plan = client.plan(OWNER, body)
        assert (plan.erasures, plan.erased_keys) == (str(listed), 2)
        assert (
            plan.erasures_as_of is not None and plan.erasures_as_of.isoformat() == "2024-05-02T09:30:00+00:00"
        )

        created = client.create_replay(OWNER, body)
        listed.write_text(listed.read_text() + f"{later},2024-06-01T00:00:00Z\n")  # after the plan's version
        run = wait_for(client, created.id, TERMINAL)

        expected = {row["event_id"] for row in rows if row["customer_id"] not in (first, second)}
        left_out = by_customer[first] + by_customer[second]
        assert run.state == "succeeded", run
        landed = consume_all(kafka_bootstrap, run.topic, expected=len(expected))
        assert {json.loads(value_of(m))["event_id"] for m in landed} == expected
        assert run.confirmed == len(expected) and run.suppressed == left_out
        assert (
            run.erasures_as_of is not None and run.erasures_as_of.isoformat() == "2024-05-02T09:30:00+00:00"
        )
        assert f"suppressed {left_out:,} (erasure list as of 2024-05-02T09:30:00Z)" in report_line(run)
        assert run.reconcile is not None and run.reconcile.verdict().clean, run.reconcile
        assert run.reconcile.suppressed == left_out
        [honoured] = daemon_store(daemon).audit.list(target=run.id, actor="watcher")
        assert (honoured.action, honoured.detail["list"], honoured.detail["suppressed"]) == (
            "erasures",
            str(listed),
            left_out,
        )

        again = client.reconcile(OWNER, run.id)  # the later erasure is not this run's version
        wait_for(client, again.id, TERMINAL)
        checked = client.get_replay(OWNER, run.id).reconcile
        assert checked is not None and checked.on_demand and checked.verdict().clean, checked
        assert checked.suppressed == left_out

        pipeline = client.schedule(
            OWNER, ScheduleBody(source="orders", every="1d", watermark="updated_at", tps=5000)
        )
        slot = fire_pipeline(client, pipeline.id)  # honours the whole list as it now is
        assert slot.state == "succeeded", slot
        everything = _rows(sample_table)
        kept = {row["event_id"] for row in everything if row["customer_id"] not in (first, second, later)}
        published = [
            json.loads(value_of(m))["event_id"]
            for m in consume_all(kafka_bootstrap, slot.topic)
            if headers_of(m)["replay-run-id"] == slot.id.encode()
        ]
        assert set(published) == kept and len(published) == len(kept)
        assert slot.suppressed == len(everything) - len(kept)

        listed.unlink()  # a list that cannot be read: nothing goes out without it
        topics_before, runs_before = (
            replay_topics(kafka_bootstrap),
            client.list_replays(OWNER, limit=200).runs,
        )
        response = httpx.post(
            f"{daemon.url}/v1/replays",
            json=body.model_dump(),
            headers={"Authorization": f"Bearer {daemon.token}", "X-Replay-Actor": OWNER},
        )
        assert response.status_code == 503 and "cannot read the erasure list" in response.json()["error"]
        assert client.list_replays(OWNER, limit=200).runs == runs_before
        assert replay_topics(kafka_bootstrap) == topics_before
    finally:
        daemon.stop()
