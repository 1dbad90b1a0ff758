"""Scheduled incremental pipelines through a real daemon, broker and local Spark.

Slots are fired with the API's run-now (the same claim path as the scheduler's own fires), so the
tests do not wait for wall-clock schedules; the restart test moves `next_run_at` into the past to
stand for slots missed while no daemon ran.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from confluent_kafka.admin import AdminClient

from daemon.contract.client import DaemonClient
from daemon.contract.models import PipelineOut, ScheduleBody
from daemon.core.errors import BadRequest, Conflict, Forbidden
from scripts.devtools.sample_table import SCHEMA, write_sample_table
from store import Store
from tests.fixtures.daemon import OWNER, STRANGER, DaemonProcess, running_daemon
from tests.fixtures.kafka import LocalBroker, consume_all, headers_of, value_of
from tests.fixtures.runs import SLOT_ENDS, fire_pipeline, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _table(tmp_path: Path) -> Path:
    table = tmp_path / "lake" / "orders"
    write_sample_table(table, date(2024, 1, 1), 1, 60, seed=3)
    return table


def _append_day(table: Path, day: date, rows: int = 60) -> None:
    write_sample_table(table, day, 1, rows, seed=3)


def _event_ids(table: Path) -> set[str]:
    return set(
        ds.dataset(table, format="parquet", partitioning="hive")
        .to_table(columns=["event_id"])["event_id"]
        .to_pylist()
    )


def _max_updated_at(table: Path) -> datetime:
    column = ds.dataset(table, format="parquet", partitioning="hive").to_table(columns=["updated_at"])[
        "updated_at"
    ]
    latest: datetime = max(column.to_pylist())
    return latest


def _by_run(bootstrap: str, topic: str) -> dict[str, list[str]]:
    landed: dict[str, list[str]] = defaultdict(list)
    for message in consume_all(bootstrap, topic, timeout_s=30):
        run_id = headers_of(message)["replay-run-id"].decode()
        landed[run_id].append(json.loads(value_of(message))["event_id"])
    return landed


def _schedule(client: DaemonClient, **overrides: Any) -> PipelineOut:
    body = {"source": "orders", "every": "1d", "watermark": "updated_at", "tps": 5000, **overrides}
    return client.schedule(OWNER, ScheduleBody.model_validate(body))


@pytest.fixture
def lake_daemon(request: pytest.FixtureRequest, tmp_path: Path, kafka_bootstrap: str) -> Any:
    """A daemon on a table of its own; SQLite unless the test asks for `postgres` (indirect param)."""
    table = _table(tmp_path)
    database = getattr(request, "param", "sqlite")
    url = request.getfixturevalue("fresh_postgres_url") if database == "postgres" else None
    daemon = running_daemon(tmp_path / "d", sample_table=table, bootstrap=kafka_bootstrap, database_url=url)
    try:
        yield daemon, table
    finally:
        daemon.stop()


def test_three_runs_publish_exactly_the_new_rows_and_commit_the_high_mark(
    lake_daemon: tuple[DaemonProcess, Path], kafka_bootstrap: str
) -> None:
    daemon, table = lake_daemon
    client = daemon.client()
    pipeline = _schedule(client)
    published: set[str] = set()
    runs: list[str] = []

    for round_, day in enumerate((None, date(2024, 1, 2), date(2024, 1, 3))):
        if day is not None:
            _append_day(table, day)
        run = fire_pipeline(client, pipeline.id, 240.0)

        new_ids = _event_ids(table) - published
        assert run.state == "succeeded", (round_, run)
        assert run.confirmed == len(new_ids)
        assert set(_by_run(kafka_bootstrap, pipeline.topic)[run.id]) == new_ids
        committed = client.get_pipeline(OWNER, pipeline.id).watermark
        assert committed is not None
        assert datetime.fromisoformat(committed) == _max_updated_at(table)
        published |= new_ids
        runs.append(run.id)

    assert client.get_pipeline(OWNER, pipeline.id).last_published_at is not None
    # its page, opened through a signed link as a browser would: its runs, newest first, and its clock
    with httpx.Client(base_url=daemon.url, follow_redirects=True) as http:
        assert http.get(client.page_link(OWNER).url).status_code == 200  # sets the session cookie
        page = http.get(f"/pipelines/{pipeline.id}")
        console = http.get("/")
    assert page.status_code == 200, page.text
    assert [page.text.index(f'<a href="/runs/{run_id}">') for run_id in reversed(runs)] == sorted(
        page.text.index(f'<a href="/runs/{run_id}">') for run_id in runs
    )
    assert "turns idle at" in page.text and "unless a run publishes first" in page.text
    assert f'<a href="/pipelines/{pipeline.id}">' in console.text


@pytest.mark.parametrize(
    "lake_daemon", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_no_new_data_records_a_skipped_run_without_launching_spark(
    lake_daemon: tuple[DaemonProcess, Path],
) -> None:
    daemon, _ = lake_daemon
    client = daemon.client()
    pipeline = _schedule(client)
    first = fire_pipeline(client, pipeline.id, 240.0)

    second = fire_pipeline(client, pipeline.id, 240.0)

    assert first.state == "succeeded"
    assert (second.state, second.failure_reason) == ("skipped", "no new data")
    assert not (daemon.state_dir / "runs" / second.id).exists()


def test_late_rows_within_the_lookback_are_sent_again_with_their_overlap(
    lake_daemon: tuple[DaemonProcess, Path], kafka_bootstrap: str
) -> None:
    daemon, table = lake_daemon
    client = daemon.client()
    pipeline = _schedule(client, lookback="1h")
    first = fire_pipeline(client, pipeline.id, 240.0)
    high = _max_updated_at(table)
    late = pa.table(
        {
            "event_id": ["evt-late-1", "evt-late-2"],
            "order_id": ["ord-late-1", "ord-late-2"],
            "customer_id": ["c-1", "c-2"],
            "status": ["paid", "paid"],
            "amount": [1.0, 2.0],
            "currency": ["EUR", "EUR"],
            "updated_at": [high - timedelta(minutes=20), high - timedelta(minutes=50)],
            "payload": ["{}", "{}"],
        },
        schema=SCHEMA,
    )
    pq.write_table(late, table / f"dt={high.date().isoformat()}" / "late-0.parquet")
    _append_day(table, date(2024, 1, 2))

    second = fire_pipeline(client, pipeline.id, 240.0)

    sent = set(_by_run(kafka_bootstrap, pipeline.topic)[second.id])
    overlap = sent & set(_by_run(kafka_bootstrap, pipeline.topic)[first.id])
    rows = ds.dataset(table, format="parquet", partitioning="hive").to_table(
        columns=["event_id", "updated_at"]
    )
    expected = {
        e
        for e, t in zip(*(rows[c].to_pylist() for c in ("event_id", "updated_at")), strict=True)
        if t > high - timedelta(hours=1)
    }
    assert second.state == "succeeded"
    assert sent == expected  # exactly (committed - lookback, new high]
    assert {"evt-late-1", "evt-late-2"} <= sent
    assert overlap, "rows within the lookback before the old mark are sent again"


def test_a_slot_missed_while_the_daemon_was_down_gives_one_catch_up_run(
    lake_daemon: tuple[DaemonProcess, Path],
) -> None:
    daemon, table = lake_daemon
    client = daemon.client()
    pipeline = _schedule(client)
    fire_pipeline(client, pipeline.id, 240.0)
    daemon.stop()
    _append_day(table, date(2024, 1, 2))
    missed = datetime.now(UTC) - timedelta(days=3)  # three daily slots passed with no daemon
    with Store(f"sqlite:///{daemon.state_dir / 'replay.db'}") as store:
        store.pipelines.update(pipeline.id, next_run_at=missed)

    daemon.start()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        runs = daemon.client().get_pipeline(OWNER, pipeline.id).runs
        if len(runs) == 2 and runs[0].state in SLOT_ENDS:
            break
        time.sleep(0.5)
    time.sleep(3)  # give a doubled fire every chance to show up

    detail = daemon.client().get_pipeline(OWNER, pipeline.id)
    assert [r.state for r in detail.runs] == ["succeeded", "succeeded"]
    assert detail.next_run_at is not None and detail.next_run_at > datetime.now(UTC)


def test_a_failed_run_leaves_the_watermark_and_the_next_run_sends_the_missed_rows(
    tmp_path: Path, kafka_bootstrap: str, broker_control: LocalBroker
) -> None:
    table = tmp_path / "lake" / "orders"
    write_sample_table(table, date(2024, 1, 1), 2, 300, seed=5)
    daemon = running_daemon(
        tmp_path / "d",
        sample_table=table,
        bootstrap=kafka_bootstrap,
        extra={"REPLAY_KAFKA_MESSAGE_TIMEOUT_MS": "3000"},
    )
    try:
        client = daemon.client()
        pipeline = _schedule(client, tps=100)
        client.pipeline_action(OWNER, pipeline.id, "run")
        run_id = _first_run_confirming(client, pipeline.id)
        with broker_control.stopped():
            failed = wait_for(client, run_id, SLOT_ENDS)
            assert client.get_pipeline(OWNER, pipeline.id).watermark is None
        second = fire_pipeline(client, pipeline.id, 240.0)
        committed = client.get_pipeline(OWNER, pipeline.id).watermark
    finally:
        daemon.stop()

    landed = _by_run(kafka_bootstrap, pipeline.topic)
    assert failed.state == "failed", failed
    assert "timed out" in (failed.failure_reason or "").lower()
    assert second.state == "succeeded"
    assert set(landed[second.id]) == _event_ids(table)  # the whole range again: nothing lost
    assert committed is not None
    assert datetime.fromisoformat(committed) == _max_updated_at(table)


def _first_run_confirming(client: DaemonClient, pipeline_id: str, timeout_s: float = 120.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = client.get_pipeline(OWNER, pipeline_id).runs
        if runs and runs[0].confirmed:  # some confirmed (None: unknown)
            return runs[0].id
        time.sleep(0.3)
    raise AssertionError("the pipeline run never reported progress")


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"every": None, "cron": "61 * * * *"}, BadRequest, "cron"),
        ({"every": None, "cron": "0 0 31 4 *"}, BadRequest, "never fires"),  # April has 30 days
        ({"every": "0m"}, BadRequest, "every"),
        ({"watermark": "shipped_at"}, BadRequest, "not the watermark column of 'orders'"),
        ({"source": "ordres"}, BadRequest, "unknown source 'ordres'"),
        ({"topic": "live"}, Conflict, "needs an explicit confirmation"),
    ],
)
def test_bad_schedule_is_refused_and_creates_nothing(
    replay_daemon: DaemonProcess, overrides: dict[str, Any], error: type[Exception], message: str
) -> None:
    client = replay_daemon.client()
    before = client.list_pipelines(OWNER)
    topics_before = _pipeline_topics(replay_daemon)

    with pytest.raises(error, match=message):
        _schedule(client, **{k: v for k, v in overrides.items()})

    assert client.list_pipelines(OWNER) == before
    assert _pipeline_topics(replay_daemon) == topics_before


def _pipeline_topics(daemon: DaemonProcess) -> set[str]:
    admin = AdminClient({"bootstrap.servers": daemon.env["REPLAY_KAFKA_BOOTSTRAP"]})
    return {name for name in admin.list_topics(timeout=10).topics if name.startswith("replay.orders.p-")}


def test_strangers_may_not_schedule_or_pause(replay_daemon: DaemonProcess) -> None:
    client = replay_daemon.client()
    with pytest.raises(Forbidden, match="only the owners of 'orders'"):
        client.schedule(STRANGER, ScheduleBody(source="orders", every="1h", watermark="updated_at"))
    pipeline = _schedule(client)

    with pytest.raises(Forbidden):
        client.pipeline_action(STRANGER, pipeline.id, "pause")


def test_pause_resume_and_unschedule_with_confirmation(replay_daemon: DaemonProcess) -> None:
    client = replay_daemon.client()
    pipeline = _schedule(client, every="15m")

    paused = client.pipeline_action(OWNER, pipeline.id, "pause")
    resumed = client.pipeline_action(OWNER, pipeline.id, "resume")
    with pytest.raises(Conflict, match="needs an explicit confirmation"):
        client.unschedule(OWNER, pipeline.id, confirm=False)
    archived = client.unschedule(OWNER, pipeline.id, confirm=True)

    assert (paused.state, resumed.state, archived.state) == ("paused", "active", "archived")
    assert resumed.next_run_at is not None and resumed.next_run_at > datetime.now(UTC)
    assert resumed.schedule == "every=15m"


def test_unknown_pipeline_is_404(replay_daemon: DaemonProcess) -> None:
    response = httpx.get(
        f"{replay_daemon.url}/v1/pipelines/p-0123456789ab",
        headers={"Authorization": f"Bearer {replay_daemon.token}", "X-Replay-Actor": OWNER},
    )

    assert response.status_code == 404
    assert response.json() == {"error": "no pipeline with id 'p-0123456789ab'"}


def test_a_slot_that_cannot_start_is_a_failed_run_with_its_reason_not_a_silent_stall(
    lake_daemon: tuple[DaemonProcess, Path],
) -> None:
    daemon, table = lake_daemon
    client = daemon.client()
    pipeline = _schedule(client)
    table.rename(table.with_name("moved-away"))  # the lake table disappears under the pipeline

    client.pipeline_action(OWNER, pipeline.id, "run")
    deadline = time.monotonic() + 30
    while not (runs := client.get_pipeline(OWNER, pipeline.id).runs) and time.monotonic() < deadline:
        time.sleep(0.5)

    [run] = runs
    assert run.state == "failed" and "the slot could not start" in (run.failure_reason or "")
    after = client.get_pipeline(OWNER, pipeline.id)
    assert after.watermark is None and after.next_run_at is not None  # nothing committed, next slot planned


def test_lookback_on_an_integer_watermark_is_refused_before_anything_exists(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    table = _table(tmp_path)
    rows = ds.dataset(table, format="parquet", partitioning="hive").to_table()
    sequenced = rows.append_column("seq", pa.array(range(rows.num_rows), pa.int64()))
    shutil.rmtree(table)
    pq.write_to_dataset(sequenced, table, partition_cols=["dt"])
    daemon = running_daemon(
        tmp_path / "d",
        sample_table=table,
        bootstrap=kafka_bootstrap,
        source_extra={"watermark_column": "seq"},
    )
    try:
        client = daemon.client()
        with pytest.raises(BadRequest, match="lookback needs a timestamp watermark column; 'seq' holds"):
            _schedule(client, watermark="seq", lookback="30m")
        assert client.list_pipelines(OWNER) == []
        assert _schedule(client, watermark="seq").watermark_column == "seq"  # without lookback it works
    finally:
        daemon.stop()
