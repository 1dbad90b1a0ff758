"""`POST /v1/pipelines` with an Idempotency-Key, over real HTTP on two daemons sharing one PostgreSQL.

Two bot replicas that both got one double click send the same create, with the same key, to two
daemons at once: one pipeline and one topic result, and every answer names it (201 for the create
that made it, 200 for the others). The same key with another command is a 422 that creates nothing;
the CLI sends a fresh key with every create.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import AdminClient

from daemon.cli.main import EXIT_OK, main
from daemon.contract.models import ScheduleBody
from daemon.core.retry import poll
from store import Store
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon

pytestmark = [pytest.mark.kafka]

BODY = ScheduleBody(source="orders", cron="0 0 1 1 *", watermark="updated_at", tps=100)  # never due here


@pytest.fixture
def replicas(
    tmp_path: Path, sample_table: Path, kafka_bootstrap: str, fresh_postgres_url: str
) -> Iterator[tuple[DaemonProcess, DaemonProcess]]:
    first = running_daemon(
        tmp_path / "a", sample_table=sample_table, bootstrap=kafka_bootstrap, database_url=fresh_postgres_url
    )
    second = None
    try:
        second = running_daemon(
            tmp_path / "b",
            sample_table=sample_table,
            bootstrap=kafka_bootstrap,
            database_url=fresh_postgres_url,
        )
        yield first, second
    finally:
        first.stop()
        if second is not None:
            second.stop()


def _post(daemon: DaemonProcess, body: ScheduleBody, key: str) -> httpx.Response:
    with httpx.Client(base_url=daemon.url, timeout=60) as http:
        return http.post(
            "/v1/pipelines",
            json=body.model_dump(mode="json", exclude_none=True),
            headers={
                "Authorization": f"Bearer {daemon.token}",
                "X-Replay-Actor": OWNER,
                "Idempotency-Key": key,
            },
        )


def _pipeline_topics(bootstrap: str) -> set[str]:
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return {name for name in topics if name.startswith("replay.orders.p-")}


def test_racing_creates_with_one_key_on_two_daemons_make_one_pipeline_and_one_topic(
    replicas: tuple[DaemonProcess, DaemonProcess], kafka_bootstrap: str
) -> None:
    before = _pipeline_topics(kafka_bootstrap)
    targets = [replicas[i % 2] for i in range(6)]

    with ThreadPoolExecutor(len(targets)) as pool:
        answers = list(pool.map(lambda daemon: _post(daemon, BODY, "slack-live-double-click"), targets))

    ids = {answer.json()["id"] for answer in answers}
    assert sorted(answer.status_code for answer in answers) == [200] * 5 + [201], [a.text for a in answers]
    assert len(ids) == 1
    [pipeline_id] = ids
    assert [p.id for p in replicas[0].client().list_pipelines(OWNER)] == [pipeline_id]
    # The losers deleted the topics they made before answering; the controller has accepted each
    # deletion, and the broker's metadata shows it a moment later (it is eventually consistent).
    winner = {f"replay.orders.{pipeline_id}"}
    created = poll(
        lambda: found if (found := _pipeline_topics(kafka_bootstrap) - before) == winner else None,
        every_s=0.2,
        timeout_s=10,
        clock=time.monotonic,
        sleep=time.sleep,
    )
    assert created == winner, _pipeline_topics(kafka_bootstrap) - before


def test_a_key_sent_again_gets_the_first_pipeline_and_with_another_command_a_422(
    replicas: tuple[DaemonProcess, DaemonProcess],
) -> None:
    first = _post(replicas[0], BODY, "k-1")
    again = _post(replicas[1], BODY, "k-1")
    other = _post(replicas[0], BODY.model_copy(update={"tps": 200}), "k-1")

    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert other.status_code == 422
    assert f"(pipeline {first.json()['id']})" in other.json()["error"] and "tps=200" in other.json()["error"]
    assert [p.id for p in replicas[0].client().list_pipelines(OWNER)] == [first.json()["id"]]


def test_the_cli_sends_a_fresh_key_with_every_create(
    replicas: tuple[DaemonProcess, DaemonProcess], monkeypatch: pytest.MonkeyPatch, fresh_postgres_url: str
) -> None:
    monkeypatch.setenv("REPLAY_DAEMON_URL", replicas[0].url)
    monkeypatch.setenv("REPLAY_API_TOKEN", replicas[0].token)
    monkeypatch.setenv("REPLAY_USER", OWNER)
    argv = ["schedule", "orders", "every=1d", "watermark=updated_at"]

    codes = [main(argv, out=io.StringIO(), err=io.StringIO()) for _ in range(2)]

    with Store(fresh_postgres_url) as store:
        keys = [p.idempotency_key for p in store.pipelines.list()]
    assert codes == [EXIT_OK, EXIT_OK]
    assert len(keys) == 2 and all(key and key.startswith("cli-") for key in keys) and keys[0] != keys[1]
