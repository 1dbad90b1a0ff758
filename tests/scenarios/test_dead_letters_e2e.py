"""``on_error`` through the real daemon, local Spark and the broker: the count on the run, everywhere shown.

The source's table holds one record larger than the producer's ``message.max.bytes`` (1 MB), which
the producer refuses at ``produce()``. The catalog makes ``dlq`` the source's default, so a plain
request sets the record aside and succeeds; a request saying ``on_error=fail`` fails naming it.
"""

from __future__ import annotations

import base64
import random
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from daemon.cli.main import describe_run
from daemon.contract.client import DaemonClient
from daemon.contract.models import RepairBody, ReplayBody, RunOut, ScheduleBody
from daemon.core.errors import BadRequest
from daemon.slack.run_messages import final_reply
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon
from tests.fixtures.kafka import consume_all, headers_of

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

WINDOW = ("2024-01-05", "2024-01-06")
TERMINAL = {"succeeded", "failed", "cancelled"}


@pytest.fixture(scope="module")
def oversize(sample_table: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(table, event id): the sample table with one payload of ~1.5 MB of random text in the window."""
    table = tmp_path_factory.mktemp("dlq-table") / "orders"
    shutil.copytree(sample_table, table)
    path = next((table / f"dt={WINDOW[0]}").glob("*.parquet"))
    data = pq.read_table(path)
    payloads = data.column("payload").to_pylist()
    payloads[3] = base64.b64encode(random.Random(5).randbytes(1_100_000)).decode()
    index = data.column_names.index("payload")
    pq.write_table(data.set_column(index, "payload", pa.array(payloads, data.schema.field(index).type)), path)
    return table, str(data.column("event_id")[3].as_py())


@pytest.fixture(scope="module")
def dlq_daemon(
    tmp_path_factory: pytest.TempPathFactory, oversize: tuple[Path, str], kafka_bootstrap: str
) -> Iterator[DaemonProcess]:
    daemon = running_daemon(
        tmp_path_factory.mktemp("replayd-dlq"),
        sample_table=oversize[0],
        bootstrap=kafka_bootstrap,
        source_extra={"on_error": "dlq"},
    )
    try:
        yield daemon
    finally:
        daemon.stop()


def window_rows(table: Path) -> int:
    dataset = ds.dataset(table, format="parquet", partitioning="hive")
    return int(dataset.count_rows(filter=(ds.field("dt") >= WINDOW[0]) & (ds.field("dt") <= WINDOW[1])))


def finished(client: DaemonClient, run_id: str, timeout_s: float = 240.0) -> RunOut:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = client.get_replay(OWNER, run_id)
        if run.state in TERMINAL:
            return run
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not finish: {run}")


def test_the_sources_dlq_default_sets_the_record_aside_and_every_view_shows_the_count(
    dlq_daemon: DaemonProcess, oversize: tuple[Path, str], kafka_bootstrap: str
) -> None:
    table, big = oversize
    client = dlq_daemon.client()
    created = client.create_replay(OWNER, ReplayBody(source="orders", window="..".join(WINDOW), tps=5000))
    run = finished(client, created.id)
    assert run.state == "succeeded", run
    assert (run.dead_lettered, run.rows_selected) == (1, window_rows(table))
    assert run.confirmed is not None
    assert run.confirmed + 1 == run.rows_selected  # confirmed + dead-lettered: every row selected
    assert run.dlq_topic == "replay.dlq.orders"
    parked = [
        m
        for m in consume_all(kafka_bootstrap, run.dlq_topic)
        if headers_of(m)["replay-run-id"] == run.id.encode()
    ]
    assert [headers_of(m)["replay-event-id"].decode() for m in parked] == [big]
    assert b"MSG_SIZE_TOO_LARGE" in headers_of(parked[0])["replay-error"]
    assert "dlq=1 set aside in replay.dlq.orders" in describe_run(run)
    reply = final_reply(run).text
    assert "1 set aside in `replay.dlq.orders` (dlq=1)" in reply


def test_on_error_fail_overrides_the_default_and_the_reason_names_the_event(
    dlq_daemon: DaemonProcess, oversize: tuple[Path, str]
) -> None:
    _, big = oversize
    client = dlq_daemon.client()
    body = ReplayBody(source="orders", window="..".join(WINDOW), tps=5000, on_error="fail")
    run = finished(client, client.create_replay(OWNER, body).id)
    assert run.state == "failed", run
    assert f"event '{big}' cannot be published" in (run.failure_reason or "")
    assert run.dead_lettered is None and run.dlq_topic is None
    assert "dlq=" not in describe_run(run) and "set aside" not in final_reply(run).text


def test_a_pipeline_run_sets_the_record_aside_and_still_commits_its_watermark(
    dlq_daemon: DaemonProcess, oversize: tuple[Path, str]
) -> None:
    table, _ = oversize
    client = dlq_daemon.client()
    body = ScheduleBody(source="orders", every="1d", watermark="updated_at", tps=5000)
    pipeline = client.schedule(OWNER, body)
    client.pipeline_action(OWNER, pipeline.id, "run")
    deadline = time.monotonic() + 240.0
    runs: list[RunOut] = []
    while time.monotonic() < deadline and not (runs and runs[0].state in TERMINAL):
        runs = client.get_pipeline(OWNER, pipeline.id).runs
        time.sleep(0.5)
    [run] = runs
    assert run.state == "succeeded", run
    everything = ds.dataset(table, format="parquet", partitioning="hive").count_rows()
    assert (run.confirmed, run.dead_lettered, run.rows_selected) == (everything - 1, 1, everything)
    assert run.dlq_topic == "replay.dlq.orders"
    assert client.get_pipeline(OWNER, pipeline.id).watermark is not None  # set aside is not a failure
    with pytest.raises(BadRequest, match="is a pipeline's run"):  # a redrive takes a replay's
        client.redrive(OWNER, run.id, RepairBody())
