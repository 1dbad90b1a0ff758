"""A replay of an Iceberg and of a Delta table through `replayd`, pinned to the snapshot it planned on.

A real daemon (SQLite, the session's broker, local Spark with the release's lake runtimes) plans a
window of each table, records the table's snapshot on the run, and is then raced by a commit that
adds events to that window. The job, its end-of-run reconcile and a `reconcile r-…` asked after the
commit all read the recorded snapshot: the topic holds exactly the window as planned, each id once,
none of the late events, and both verdicts are clean. A watermark pipeline on each format reads
every slot's high mark and rows at one pinned version and publishes each live row once, the next
commit's rows in the next slot. A daemon whose local jobs lack a format's runtime refuses such a
source at plan time and at schedule time, and creates nothing.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.rest import RestCatalog

from daemon.contract.models import ReplayBody, ScheduleBody
from daemon.core.errors import BadRequest
from daemon.slack.run_report import rerun_command
from tests.fixtures.aws import REGION, AwsClients, aws_client
from tests.fixtures.catalog_services import HiveTables
from tests.fixtures.counting_proxy import counting_proxy
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon
from tests.fixtures.kafka import consume_all, headers_of
from tests.fixtures.lake_catalog import (
    catalog_settings,
    commit_late_events,
    hadoop_metadata_file,
    registered,
)
from tests.fixtures.runs import (
    TERMINAL,
    fire_pipeline,
    replay_topics,
    snapshot_event_ids,
    wait_for,
    window_event_ids,
)
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
    # a private copy: the session's copies stay as the other tests know them (this one commits into it)
    copy = replace(lake_copies[table_format], path=tmp_path / "warehouse" / "sample" / "orders")
    shutil.copytree(lake_copies[table_format].path, copy.path)
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
        assert set(ids) == snapshot_event_ids(table_format, copy.path, planned.snapshot, *DAYS)
        assert not [event for event in ids if event.startswith("late-")]

        again = client.reconcile(OWNER, run.id)  # asked after the commit: still the run's snapshot
        wait_for(client, again.id, TERMINAL, timeout_s=300)
        checked = client.get_replay(OWNER, run.id)
        assert checked.reconcile is not None and checked.reconcile.on_demand
        assert checked.reconcile.verdict().clean and checked.reconcile.found == expected, checked.reconcile

        # the retry a person is offered reads the table as the run did (snapshot=), not as it is now
        assert f" snapshot={planned.snapshot}" in rerun_command(checked)
        retried = client.plan(OWNER, body.model_copy(update={"snapshot": planned.snapshot}))
        assert (retried.rows, retried.snapshot) == (expected, planned.snapshot)
        assert client.plan(OWNER, body).rows == expected + LATE_ROWS
        with pytest.raises(BadRequest, match=r"not in the metadata|does not exist"):
            client.plan(OWNER, body.model_copy(update={"snapshot": "999999999"}))
    finally:
        daemon.stop()


def _named_table_daemon(
    tmp_path: Path,
    *,
    sample: Path,
    bootstrap: str,
    jars: list[Path],
    catalogs: dict[str, Any],
    table: str,
    table_format: str,
    extra: dict[str, str] | None = None,
) -> DaemonProcess:
    """A daemon whose "orders" source is ``table`` in one of ``catalogs``, with the lake runtimes."""
    return running_daemon(
        tmp_path,
        sample_table=sample,
        bootstrap=bootstrap,
        extra={
            "REPLAY_LOCAL_JARS": ",".join(map(str, jars)),
            "REPLAY_LAKE_CATALOGS": json.dumps(catalogs),
            **(extra or {}),
        },
        source_extra={"table": {"table": table, "format": table_format}, "watermark_column": None},
    )


def test_an_iceberg_table_named_in_a_sql_catalog_replays_the_snapshot_its_plan_read(
    lake_copies: dict[str, LakeCopy], lake_jars: list[Path], kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The daemon asks the catalog; the job reads the metadata file the plan recorded, so a commit
    through the catalog mid-run moves the name, not the run."""
    copy, url = lake_copies["iceberg"], f"sqlite:///{tmp_path / 'catalog.db'}"
    table = registered(url, tmp_path, copy)
    catalogs = {"lake": catalog_settings(url, tmp_path).model_dump(mode="json", exclude_none=True)}
    daemon = _named_table_daemon(
        tmp_path,
        sample=copy.path,
        bootstrap=kafka_bootstrap,
        jars=lake_jars,
        catalogs=catalogs,
        table="lake.sample.orders",
        table_format="iceberg",
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


def test_a_catalogs_secret_is_sent_to_the_catalog_and_nowhere_else(
    rest_catalog_uri: str,
    lake_copies: dict[str, LakeCopy],
    lake_jars: list[Path],
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    """An Iceberg table named in a REST catalog that takes a bearer token, replayed through `replayd`
    logging at DEBUG: the token reaches the catalog on every request the daemon makes, and no job
    spec, job log, daemon log, store row or other file the daemon writes."""
    token = f"catalog-token-{uuid.uuid4().hex}"
    copy = tmp_path / "orders"
    shutil.copytree(lake_copies["iceberg"].path, copy)
    namespace = f"sales_{uuid.uuid4().hex[:8]}"
    writer = RestCatalog("writer", uri=rest_catalog_uri)
    writer.create_namespace(namespace)
    writer.register_table(
        f"{namespace}.orders", hadoop_metadata_file(replace(lake_copies["iceberg"], path=copy))
    )
    with counting_proxy(rest_catalog_uri) as proxy:
        daemon = _named_table_daemon(
            tmp_path / "d",
            sample=copy,
            bootstrap=kafka_bootstrap,
            jars=lake_jars,
            catalogs={"lake": {"type": "rest", "uri": proxy.url, "password": token}},
            table=f"lake.{namespace}.orders",
            table_format="iceberg",
            extra={"REPLAY_LOG_LEVEL": "DEBUG"},
        )
        try:
            client = daemon.client()
            run = client.create_replay(OWNER, ReplayBody(source="orders", window=WINDOW, tps=200))
            spec = _spec_while_running(daemon.state_dir / "runs" / run.id)
            ended = wait_for(client, run.id, TERMINAL, timeout_s=300)
        finally:
            daemon.stop()

    assert ended.state == "succeeded", ended.failure_reason
    assert ended.reconcile is not None and ended.reconcile.verdict().clean, ended.reconcile
    sent = [value for value in proxy.authorizations if value is not None]
    assert sent and set(sent) == {f"Bearer {token}"}, proxy.authorizations  # the catalog got it
    assert json.loads(spec)["source"]["path"].endswith(".metadata.json")  # the job reads a file
    assert token not in spec
    leaked = [
        str(path.relative_to(tmp_path))
        for path in (tmp_path / "d").rglob("*")
        if path.is_file() and token.encode() in path.read_bytes()
    ]
    assert leaked == []  # daemon logs, job logs, the store's database, run files
    assert '"level": "debug"' in daemon.log_text()  # the daemon said all it says


def _spec_while_running(run_dir: Path) -> str:
    """The job spec as the job got it: the daemon deletes it once the run ended."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            return (run_dir / "spec.json").read_text()
        except FileNotFoundError:
            time.sleep(0.1)
    raise AssertionError(f"no spec.json in {run_dir} within 120 s")


def test_a_delta_table_named_in_the_glue_data_catalog_replays_from_the_location_it_gives(
    aws: AwsClients,
    lake_copies: dict[str, LakeCopy],
    lake_jars: list[Path],
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    """Spark's session catalog on EMR is the Data Catalog: the daemon asks it (moto's Glue, over
    HTTP) where the table lives, the run records that, and the job reads it there, pinned."""
    copy = lake_copies["delta"]
    glue = aws_client("glue", aws.endpoint_url)
    glue.create_database(DatabaseInput={"Name": "sales"})
    glue.create_table(  # as Spark registers a Delta table: its location in the serde's `path`
        DatabaseName="sales",
        TableInput={
            "Name": "orders",
            "Parameters": {"spark.sql.sources.provider": "delta"},
            "StorageDescriptor": {
                "Location": f"{copy.path}-__PLACEHOLDER__",
                "SerdeInfo": {"Parameters": {"path": str(copy.path)}},
            },
        },
    )
    catalogs = {"glue": {"type": "glue", "region": REGION, "endpoint": aws.endpoint_url}}
    daemon = _named_table_daemon(
        tmp_path,
        sample=copy.path,
        bootstrap=kafka_bootstrap,
        jars=lake_jars,
        catalogs=catalogs,
        table="glue.sales.orders",
        table_format="delta",
        extra={"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"},
    )
    try:
        client = daemon.client()
        body = ReplayBody(source="orders", window=WINDOW, tps=40)
        planned = client.plan(OWNER, body)
        assert planned.snapshot is not None and planned.rows > 0
        run = client.create_replay(OWNER, body)
        ended = wait_for(client, run.id, TERMINAL, timeout_s=300)
        assert ended.state == "succeeded", ended.failure_reason
        assert (ended.snapshot, ended.confirmed) == (planned.snapshot, planned.rows)
        assert ended.reconcile is not None and ended.reconcile.verdict().clean, ended.reconcile
        ids = [headers_of(m)["replay-event-id"].decode() for m in consume_all(kafka_bootstrap, ended.topic)]
        at_version = DeltaTable(str(copy.path), version=int(planned.snapshot)).to_pyarrow_dataset()
        window = pc.field("dt").isin([date.fromisoformat(day) for day in DAYS])
        expected = at_version.to_table(columns=["event_id"], filter=window).column("event_id").to_pylist()
        assert sorted(ids) == sorted(expected)
    finally:
        daemon.stop()


def test_a_parquet_table_named_in_a_hive_metastore_replays_from_the_location_it_gives(
    hive_tables: HiveTables, lake_jars: list[Path], kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Spark's session catalog outside AWS is a Hive metastore: the daemon asks it (over Thrift)
    where the table Spark registered lives, the run records that, and the job reads it there."""
    catalogs = {"hive": {"type": "hive", "uri": hive_tables.uri}}
    daemon = _named_table_daemon(
        tmp_path,
        sample=hive_tables.parquet,
        bootstrap=kafka_bootstrap,
        jars=lake_jars,
        catalogs=catalogs,
        table="hive.sales.orders_parquet",
        table_format="parquet",
    )
    try:
        client = daemon.client()
        body = ReplayBody(source="orders", window=WINDOW, tps=200)
        planned = client.plan(OWNER, body)
        assert planned.rows == len(window_event_ids(hive_tables.parquet, *DAYS))
        run = client.create_replay(OWNER, body)
        ended = wait_for(client, run.id, TERMINAL, timeout_s=300)
        assert ended.state == "succeeded", ended.failure_reason
        assert ended.confirmed == planned.rows
        assert ended.reconcile is not None and ended.reconcile.verdict().clean, ended.reconcile
        ids = [headers_of(m)["replay-event-id"].decode() for m in consume_all(kafka_bootstrap, ended.topic)]
        assert sorted(ids) == sorted(window_event_ids(hive_tables.parquet, *DAYS))
    finally:
        daemon.stop()


def test_a_parquet_replay_reads_the_files_its_plan_listed_while_another_lands(
    sample_table: Path, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A Parquet table has no snapshot: the run pins the window's files its plan listed. A file
    written into the window after that is read by no part of the run: not the job, not its reconcile."""
    table = tmp_path / "orders"
    shutil.copytree(sample_table, table)
    day = table / f"dt={LATE_DAY}"
    daemon = running_daemon(tmp_path / "d", sample_table=table, bootstrap=kafka_bootstrap)
    try:
        client = daemon.client()
        body = ReplayBody(source="orders", window=WINDOW, tps=100)
        expected = window_event_ids(table, *DAYS)
        run = client.create_replay(OWNER, body)
        late = pq.read_table(next(day.glob("*.parquet"))).slice(0, LATE_ROWS)
        events = [f"late-{n}" for n in range(LATE_ROWS)]
        pq.write_table(
            late.set_column(late.schema.get_field_index("event_id"), "event_id", [events]),
            day / "late.parquet",
        )
        assert client.plan(OWNER, body).rows == len(expected) + LATE_ROWS, "the new file is in the window"
        assert (
            run.rows_planned == len(expected)
            and run.listed_files == len(list(table.glob("dt=2024-01-0[23]/*.parquet"))) - 1
        )

        ended = wait_for(client, run.id, TERMINAL, timeout_s=300)
        assert ended.state == "succeeded", ended.failure_reason
        assert ended.confirmed == len(expected) and ended.reconcile is not None
        assert ended.reconcile.verdict().clean, ended.reconcile
        ids = [headers_of(m)["replay-event-id"].decode() for m in consume_all(kafka_bootstrap, ended.topic)]
        assert sorted(ids) == sorted(expected)
    finally:
        daemon.stop()


@pytest.mark.parametrize(
    ("declared", "actual", "refusal"),
    [
        (
            "parquet",
            "delta",
            r"is a Delta table \(it has _delta_log/\), not plain Parquet: declare it with format: delta",
        ),
        ("parquet", "iceberg", r"is an Iceberg table \(it has metadata/\), not plain Parquet"),
        ("iceberg", "delta", r"is not an Iceberg table at a path"),
        ("delta", "missing", r"is not a Delta table \(no _delta_log there\)"),
    ],
)
def test_a_table_that_is_not_there_or_not_of_its_format_is_refused_naming_file_and_source(
    declared: str,
    actual: str,
    refusal: str,
    lake_copies: dict[str, LakeCopy],
    lake_jars: list[Path],
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    """Reading a Delta or Iceberg table's files as plain Parquet would replay deleted and overwritten
    rows: refused, as a path holding no table of the declared format is, before anything exists."""
    path = tmp_path / "nothing-here" if actual == "missing" else lake_copies[actual].path
    daemon = running_daemon(
        tmp_path / "d",
        sample_table=path,
        bootstrap=kafka_bootstrap,
        extra={"REPLAY_LOCAL_JARS": ",".join(map(str, lake_jars)), "REPLAY_LOCAL_STANDBY": "false"},
        source_extra={"table": {"path": str(path), "format": declared}, "watermark_column": None},
    )
    named = rf"{re.escape(str(tmp_path / 'd' / 'sources.yaml'))}: source 'orders', its table: .*{refusal}"
    try:
        client, topics = daemon.client(), replay_topics(kafka_bootstrap)
        body = ReplayBody(source="orders", window=WINDOW, tps=40)
        for ask in (client.plan, client.create_replay):
            with pytest.raises(BadRequest, match=named):
                ask(OWNER, body)
        assert client.list_replays(OWNER).runs == []
        assert replay_topics(kafka_bootstrap) == topics
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
        # nor is a pipeline: refused when scheduled, not failed at every slot
        with pytest.raises(BadRequest, match=r"iceberg table .* no iceberg runtime .* REPLAY_LOCAL_JARS"):
            client.schedule(OWNER, ScheduleBody(source="orders", every="1h", watermark="updated_at"))
        assert client.list_replays(OWNER).runs == [] and client.list_pipelines(OWNER) == []
        assert replay_topics(kafka_bootstrap) == topics
    finally:
        daemon.stop()


@pytest.mark.parametrize("table_format", ["parquet", "iceberg", "delta"])
def test_a_source_naming_a_column_its_table_lacks_is_refused_naming_file_source_and_field(
    table_format: str,
    lake_copies: dict[str, LakeCopy],
    lake_jars: list[Path],
    sample_table: Path,
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    path = sample_table if table_format == "parquet" else lake_copies[table_format].path
    daemon = running_daemon(
        tmp_path,
        sample_table=path,
        bootstrap=kafka_bootstrap,
        extra={"REPLAY_LOCAL_JARS": ",".join(map(str, lake_jars)), "REPLAY_LOCAL_STANDBY": "false"},
        source_extra={
            "table": {"path": str(path), "format": table_format},
            "key_column": "order_ref",  # the table's is order_id
            "type_column": "kind",
        },
    )
    catalog = tmp_path / "sources.yaml"
    refusal = (
        rf"{re.escape(str(catalog))}: source 'orders' names columns its table does not have: "
        r"key_column 'order_ref'; type_column 'kind' \(the table has: .*order_id"
    )
    try:
        client, topics = daemon.client(), replay_topics(kafka_bootstrap)
        body = ReplayBody(source="orders", window=WINDOW, tps=40)
        for ask in (client.plan, client.create_replay):
            with pytest.raises(BadRequest, match=refusal):
                ask(OWNER, body)
        with pytest.raises(BadRequest, match=refusal):
            client.schedule(OWNER, ScheduleBody(source="orders", every="1h", watermark="updated_at"))
        if table_format == "parquet":
            with pytest.raises(BadRequest, match=r"snapshot=3: .* is parquet, which has no snapshots"):
                client.plan(OWNER, body.model_copy(update={"snapshot": "3"}))
        if table_format == "iceberg":  # this Delta copy keeps no change feed: refused before its columns
            with pytest.raises(BadRequest, match=refusal):
                client.schedule(OWNER, ScheduleBody(source="orders", every="1h", incremental="snapshot"))
        assert client.list_replays(OWNER).runs == [] and client.list_pipelines(OWNER) == []
        assert replay_topics(kafka_bootstrap) == topics
    finally:
        daemon.stop()


def _newer(rows: pa.Table, count: int, tag: str) -> tuple[list[dict[str, Any]], datetime]:
    """``count`` new events an hour after the table's newest one, on its next day; and their time."""
    newest = max(rows.column("updated_at").to_pylist())
    moment = (newest if newest.tzinfo else newest.replace(tzinfo=UTC)) + timedelta(hours=1)
    template = rows.slice(0, 1).to_pylist()[0]
    events = [f"{tag}-{n}" for n in range(count)]
    return [
        {**template, "event_id": event, "order_id": event, "updated_at": moment, "dt": moment.date()}
        for event in events
    ], moment


@pytest.mark.parametrize("table_format", ["iceberg", "delta"])
def test_a_watermark_pipeline_publishes_each_commit_once_at_the_version_its_slot_read(
    table_format: str,
    lake_copies: dict[str, LakeCopy],
    lake_jars: list[Path],
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    """Slot one publishes every live row of the version it pinned (deleted and overwritten rows
    absent), slot two exactly the rows the next commit added; the high mark is the newest live row's."""
    copy, extra = lake_copies[table_format], {"REPLAY_LOCAL_JARS": ",".join(map(str, lake_jars))}
    if table_format == "delta":
        shutil.copytree(copy.path, tmp_path / "delta")  # commits of its own, seen by no other test
        path = str(tmp_path / "delta")
        table_source: dict[str, str] = {"path": path, "format": "delta"}

        def live() -> pa.Table:
            return DeltaTable(path).to_pyarrow_dataset().to_table()

        def commit(rows: list[dict[str, Any]]) -> None:
            write_deltalake(path, pa.Table.from_pylist(rows, schema=live().schema), mode="append")
    else:
        url = f"sqlite:///{tmp_path / 'catalog.db'}"
        table = registered(url, tmp_path, copy)  # commits through the catalog move the name only
        catalogs = {"lake": catalog_settings(url, tmp_path).model_dump(mode="json", exclude_none=True)}
        extra["REPLAY_LAKE_CATALOGS"] = json.dumps(catalogs)
        table_source = {"table": "lake.sample.orders", "format": "iceberg"}

        def live() -> pa.Table:
            table.refresh()
            return table.scan().to_arrow()

        def commit(rows: list[dict[str, Any]]) -> None:
            table.append(pa.Table.from_pylist(rows, schema=table.schema().as_arrow()))

    daemon = running_daemon(
        tmp_path / "d",
        sample_table=copy.path,
        bootstrap=kafka_bootstrap,
        extra=extra,
        source_extra={"table": table_source, "watermark_column": "updated_at"},
    )
    try:
        client = daemon.client()
        pipeline = client.schedule(
            OWNER, ScheduleBody(source="orders", every="1d", watermark="updated_at", tps=5000)
        )
        first_ids = set(live().column("event_id").to_pylist())  # other tests may have committed too

        first = fire_pipeline(client, pipeline.id)
        assert first.state == "succeeded", first.failure_reason
        assert first.snapshot == client.sources(OWNER)[0].snapshot  # the version the slot pinned
        assert first.confirmed == len(first_ids)
        assert first.reconcile is not None and first.reconcile.verdict().clean, first.reconcile
        committed = client.get_pipeline(OWNER, pipeline.id).watermark
        assert committed is not None
        assert datetime.fromisoformat(committed) == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(
            microseconds=copy.high_us
        )  # the newest live row's: the newest event was deleted

        added, moment = _newer(live(), 4, f"wm-{table_format}")
        commit(added)
        second = fire_pipeline(client, pipeline.id)
        assert second.state == "succeeded", second.failure_reason
        assert second.snapshot != first.snapshot and second.confirmed == len(added)
        assert datetime.fromisoformat(client.get_pipeline(OWNER, pipeline.id).watermark or "") == moment

        landed: dict[str, list[str]] = {}
        for message in consume_all(kafka_bootstrap, pipeline.topic):
            headers = headers_of(message)
            landed.setdefault(headers["replay-run-id"].decode(), []).append(
                headers["replay-event-id"].decode()
            )
        assert sorted(landed[first.id]) == sorted(first_ids)  # each live row once, nothing else
        assert sorted(landed[second.id]) == sorted(row["event_id"] for row in added)
    finally:
        daemon.stop()


@pytest.mark.parametrize("table_format", ["iceberg", "delta"])
def test_a_pipeline_following_commits_publishes_each_append_once_and_stops_at_a_delete(
    table_format: str,
    lake_copies: dict[str, LakeCopy],
    lake_jars: list[Path],
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    """`incremental=snapshot`: slot one publishes the table at its current snapshot, slot two exactly
    the rows the next append committed (read incrementally: Iceberg's append scan, Delta's change
    data feed), a slot with no commit publishes nothing, and a commit that deleted a row stops the
    pipeline with that commit named while the published snapshot stays where it was."""
    copy, extra = lake_copies[table_format], {"REPLAY_LOCAL_JARS": ",".join(map(str, lake_jars))}
    if table_format == "delta":
        path = str(tmp_path / "delta")  # the sample's live rows, in a table that keeps a change feed
        current = DeltaTable(str(copy.path)).to_pyarrow_dataset().to_table()
        write_deltalake(
            path, current, partition_by=["dt"], configuration={"delta.enableChangeDataFeed": "true"}
        )
        table_source: dict[str, str] = {"path": path, "format": "delta"}

        def live() -> pa.Table:
            return DeltaTable(path).to_pyarrow_dataset().to_table()

        def commit(rows: list[dict[str, Any]]) -> None:
            write_deltalake(path, pa.Table.from_pylist(rows, schema=live().schema), mode="append")

        def delete(event_id: str) -> None:
            DeltaTable(path).delete(f"event_id = '{event_id}'")
    else:
        url = f"sqlite:///{tmp_path / 'catalog.db'}"
        table = registered(url, tmp_path, copy)  # commits through the catalog move the name only
        catalogs = {"lake": catalog_settings(url, tmp_path).model_dump(mode="json", exclude_none=True)}
        extra["REPLAY_LAKE_CATALOGS"] = json.dumps(catalogs)
        table_source = {"table": "lake.sample.orders", "format": "iceberg"}

        def live() -> pa.Table:
            table.refresh()
            return table.scan().to_arrow()

        def commit(rows: list[dict[str, Any]]) -> None:
            table.append(pa.Table.from_pylist(rows, schema=table.schema().as_arrow()))

        def delete(event_id: str) -> None:
            table.delete(f"event_id = '{event_id}'")

    daemon = running_daemon(
        tmp_path / "d",
        sample_table=copy.path,
        bootstrap=kafka_bootstrap,
        extra=extra,
        source_extra={"table": table_source, "watermark_column": None},
    )
    try:
        client = daemon.client()
        pipeline = client.schedule(
            OWNER, ScheduleBody(source="orders", every="1d", incremental="snapshot", tps=5000)
        )
        assert (pipeline.incremental, pipeline.watermark_column) == ("snapshot", None)
        first_ids = set(live().column("event_id").to_pylist())

        first = fire_pipeline(client, pipeline.id)
        assert first.state == "succeeded", first.failure_reason
        assert first.snapshot is not None and first.window == f"commits (-inf, {first.snapshot}]"
        assert first.confirmed == len(first_ids)
        assert first.reconcile is not None and first.reconcile.verdict().clean, first.reconcile
        assert client.get_pipeline(OWNER, pipeline.id).watermark == first.snapshot

        added, _ = _newer(live(), 4, f"commits-{table_format}")
        commit(added)
        second = fire_pipeline(client, pipeline.id)
        assert second.state == "succeeded", second.failure_reason
        assert second.window == f"commits ({first.snapshot}, {second.snapshot}]"
        assert second.confirmed == len(added)
        assert second.reconcile is not None and second.reconcile.verdict().clean, second.reconcile
        assert client.get_pipeline(OWNER, pipeline.id).watermark == second.snapshot

        idle = fire_pipeline(client, pipeline.id)  # no commit since: no job
        assert (idle.state, idle.failure_reason) == ("skipped", "no new data")

        delete(added[0]["event_id"])
        stopped = fire_pipeline(client, pipeline.id)
        assert stopped.state == "failed"
        assert "did not only append rows" in (stopped.failure_reason or ""), stopped.failure_reason
        assert client.get_pipeline(OWNER, pipeline.id).watermark == second.snapshot

        landed: dict[str, list[str]] = {}
        for message in consume_all(kafka_bootstrap, pipeline.topic):
            headers = headers_of(message)
            landed.setdefault(headers["replay-run-id"].decode(), []).append(
                headers["replay-event-id"].decode()
            )
        assert sorted(landed[first.id]) == sorted(first_ids)  # each live row once, nothing else
        assert sorted(landed[second.id]) == sorted(row["event_id"] for row in added)
        assert set(landed) == {first.id, second.id}
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
