"""A replay of an Iceberg and of a Delta table through `replayd`, pinned to the snapshot it planned on.

A real daemon (SQLite, the session's broker, local Spark with the release's lake runtimes) plans a
window of each table, records the table's snapshot on the run, and is then raced by a commit that
adds events to that window. The job, its end-of-run reconcile and a `reconcile r-…` asked after the
commit all read the recorded snapshot: the topic holds exactly the window as planned, each id once,
none of the late events, and both verdicts are clean. A daemon whose local jobs lack a format's
runtime refuses such a source at plan time and creates nothing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from daemon.contract.models import ReplayBody, ScheduleBody
from daemon.core.errors import BadRequest
from tests.fixtures.daemon import OWNER, running_daemon
from tests.fixtures.kafka import consume_all, headers_of
from tests.fixtures.lake_catalog import catalog_settings, commit_late_events, registered
from tests.fixtures.runs import TERMINAL, replay_topics, wait_for
from tests.fixtures.spark import LAKE_TABLES, LakeCopy, lake_submit, spark_environment

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

WINDOW, DAYS = "2024-01-02..2024-01-03", ("2024-01-02", "2024-01-03")
LATE_DAY, LATE_ROWS = "2024-01-02", 5


def _commit_late_events(copy: LakeCopy, jars: list[Path]) -> None:
    """Another writer adds events to the window: Delta through `deltalake`, Iceberg through Spark."""
    if copy.format == "delta":
        current = DeltaTable(str(copy.path)).to_pyarrow_dataset().to_table()
        template = (
            current.filter(pc.field("dt") == pa.scalar(date.fromisoformat(LATE_DAY)))
            .slice(0, 1)
            .to_pylist()[0]
        )
        late = [
            {**template, "event_id": f"late-{LATE_DAY}-{n}", "order_id": f"late-{n}"}
            for n in range(LATE_ROWS)
        ]
        write_deltalake(str(copy.path), pa.Table.from_pylist(late, schema=current.schema), mode="append")
        return
    warehouse = copy.path.parent.parent  # <warehouse>/sample/orders
    done = subprocess.run(
        [*lake_submit(jars), str(LAKE_TABLES), "append", str(warehouse), LATE_DAY, str(LATE_ROWS)],
        capture_output=True,
        text=True,
        timeout=300,
        env=spark_environment(),
        check=False,
    )
    assert "LAKE_TABLES " in done.stdout, done.stderr[-3000:]


@pytest.mark.parametrize("table_format", ["iceberg", "delta"])
def test_a_replay_reads_its_planned_snapshot_while_a_commit_lands(
    table_format: str,
    lake_copies: dict[str, LakeCopy],
    lake_jars: list[Path],
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    copy = lake_copies[table_format]
    daemon = running_daemon(
        tmp_path,
        sample_table=copy.path,
        bootstrap=kafka_bootstrap,
        extra={"REPLAY_LOCAL_JARS": ",".join(map(str, lake_jars))},
        source_extra={"table": {"path": str(copy.path), "format": table_format}, "watermark_column": None},
    )
    try:
        client = daemon.client()
        body = ReplayBody(source="orders", window=WINDOW, tps=40)
        planned = client.plan(OWNER, body)
        expected = sum(copy.days[day] for day in DAYS)
        assert planned.rows == expected and planned.snapshot is not None
        listed = client.sources(OWNER)[0]  # `/replay sources` shows the version a plan now pins
        assert (listed.table_format, listed.snapshot) == (table_format, planned.snapshot)

        run = client.create_replay(OWNER, body)
        assert run.snapshot == planned.snapshot and run.rows_planned == expected
        _commit_late_events(copy, lake_jars)  # lands while the job starts and publishes
        assert client.plan(OWNER, body).snapshot != planned.snapshot, "the commit made a new snapshot"
        assert client.sources(OWNER)[0].snapshot == client.plan(OWNER, body).snapshot

        ended = wait_for(client, run.id, TERMINAL, timeout_s=300)
        assert ended.state == "succeeded", ended.failure_reason
        assert ended.snapshot == planned.snapshot
        assert ended.confirmed == expected and ended.reconcile is not None
        assert ended.reconcile.verdict().clean, ended.reconcile

        ids = [headers_of(m)["replay-event-id"].decode() for m in consume_all(kafka_bootstrap, ended.topic)]
        assert len(ids) == len(set(ids)) == expected
        assert not [event for event in ids if event.startswith("late-")]

        again = client.reconcile(OWNER, run.id)  # asked after the commit: still the run's snapshot
        wait_for(client, again.id, TERMINAL, timeout_s=300)
        checked = client.get_replay(OWNER, run.id)
        assert checked.reconcile is not None and checked.reconcile.on_demand
        assert checked.reconcile.verdict().clean and checked.reconcile.found == expected, checked.reconcile
    finally:
        daemon.stop()


def test_an_iceberg_table_named_in_a_sql_catalog_replays_the_snapshot_its_plan_read(
    lake_copies: dict[str, LakeCopy], lake_jars: list[Path], kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The daemon asks the catalog; the job reads the metadata file the plan recorded, so a commit
    through the catalog mid-run moves the name, not the run."""
    copy, url = lake_copies["iceberg"], f"sqlite:///{tmp_path / 'catalog.db'}"
    table = registered(url, tmp_path, copy)
    catalogs = {"lake": catalog_settings(url, tmp_path).model_dump(mode="json", exclude_none=True)}
    daemon = running_daemon(
        tmp_path,
        sample_table=copy.path,
        bootstrap=kafka_bootstrap,
        extra={
            "REPLAY_LOCAL_JARS": ",".join(map(str, lake_jars)),
            "REPLAY_LAKE_CATALOGS": json.dumps(catalogs),
        },
        source_extra={
            "table": {"table": "lake.sample.orders", "format": "iceberg"},
            "watermark_column": None,
        },
    )
    try:
        client = daemon.client()
        body = ReplayBody(source="orders", window=WINDOW, tps=40)
        planned = client.plan(OWNER, body)
        expected = planned.rows
        assert expected > 0 and planned.snapshot is not None
        assert client.sources(OWNER)[0].snapshot == planned.snapshot

        run = client.create_replay(OWNER, body)
        late = commit_late_events(table, LATE_DAY, LATE_ROWS)  # through the catalog, as the job starts
        moved = client.plan(OWNER, body)
        assert (moved.snapshot != planned.snapshot, moved.rows) == (True, expected + LATE_ROWS)

        ended = wait_for(client, run.id, TERMINAL, timeout_s=300)
        assert ended.state == "succeeded", ended.failure_reason
        assert (ended.snapshot, ended.confirmed) == (planned.snapshot, expected)
        assert ended.reconcile is not None and ended.reconcile.verdict().clean, ended.reconcile
        ids = [headers_of(m)["replay-event-id"].decode() for m in consume_all(kafka_bootstrap, ended.topic)]
        assert len(ids) == len(set(ids)) == expected
        assert not set(late) & set(ids)
    finally:
        daemon.stop()


def test_a_daemon_without_a_formats_runtime_refuses_the_source_and_creates_nothing(
    lake_copies: dict[str, LakeCopy], kafka_bootstrap: str, tmp_path: Path
) -> None:
    copy = lake_copies["iceberg"]
    daemon = running_daemon(
        tmp_path,
        sample_table=copy.path,
        bootstrap=kafka_bootstrap,
        source_extra={"table": {"path": str(copy.path), "format": "iceberg"}},  # and its watermark column
    )
    try:
        client, topics = daemon.client(), replay_topics(kafka_bootstrap)
        body = ReplayBody(source="orders", window=WINDOW, tps=40)
        for ask in (client.plan, client.create_replay):
            with pytest.raises(BadRequest, match=r"iceberg table .* no iceberg runtime .* REPLAY_LOCAL_JARS"):
                ask(OWNER, body)
        # a watermark pipeline reads Parquet only: refused when scheduled, not failed at every slot
        with pytest.raises(
            BadRequest, match="watermark pipelines read Parquet sources; 'orders' is stored as iceberg"
        ):
            client.schedule(OWNER, ScheduleBody(source="orders", every="1h", watermark="updated_at"))
        assert client.list_replays(OWNER).runs == [] and client.list_pipelines(OWNER) == []
        assert replay_topics(kafka_bootstrap) == topics
    finally:
        daemon.stop()


def test_a_table_that_stops_being_readable_is_still_listed_with_the_reason(
    lake_copies: dict[str, LakeCopy], lake_jars: list[Path], kafka_bootstrap: str, tmp_path: Path
) -> None:
    table = tmp_path / "orders"
    shutil.copytree(lake_copies["iceberg"].path, table)
    daemon = running_daemon(
        tmp_path,
        sample_table=table,
        bootstrap=kafka_bootstrap,
        extra={"REPLAY_LOCAL_JARS": ",".join(map(str, lake_jars))},
        source_extra={"table": {"path": str(table), "format": "iceberg"}, "watermark_column": None},
    )
    try:
        client = daemon.client()
        assert client.sources(OWNER)[0].snapshot is not None
        shutil.rmtree(table / "metadata")  # someone drops the table under a running daemon

        listed = client.sources(OWNER)[0]
        assert listed.snapshot is None
        assert listed.snapshot_unreadable is not None and str(table) in listed.snapshot_unreadable
        with pytest.raises(BadRequest, match=str(table)):
            client.plan(OWNER, ReplayBody(source="orders", window=WINDOW, tps=40))
        assert client.list_replays(OWNER).runs == []
    finally:
        daemon.stop()
