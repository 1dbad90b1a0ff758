"""With a dependency down, the daemon says so within seconds, by name and place, and every front end
(the client, the `replay` CLI, the Slack bot) passes that on instead of "the Replay Service did not
answer". Kafka is the test run's real broker, stopped for this module's tests and started again after
them; the table storage is pyarrow's S3 client pointed at a port nothing listens on."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from datetime import date

import httpx
import pytest

from daemon.adapters.table_stats import ParquetTableStats
from daemon.cli.main import EXIT_FAILED, main
from daemon.contract.models import ReplayBody
from daemon.core.errors import DependencyDown
from daemon.core.grammar import ReplayCommand, parse
from daemon.usecases.ports import WindowRows
from scripts.devtools.slack_standin import SlackStandin
from tests.fixtures.daemon import NO_JOBS, OWNER, DaemonProcess, free_port
from tests.fixtures.kafka import LocalBroker
from tests.fixtures.slack import BotUnderTest, serve_bot

pytestmark = [pytest.mark.kafka, NO_JOBS]

A_FEW_SECONDS = 8.0  # the daemon's bound is 3 s; the client would give up only after 10 s
WINDOW = "2024-01-02..2024-01-03"


@pytest.fixture(scope="module")
def kafka_down(
    replay_daemon: DaemonProcess, bot_on_replay_daemon: BotUnderTest, broker_control: LocalBroker
) -> Iterator[str]:
    """The broker stopped for the module's tests (the daemon and the bot started while it was up)."""
    with broker_control.stopped():
        yield broker_control.bootstrap


@pytest.fixture(scope="module")
def bot_on_replay_daemon(replay_daemon: DaemonProcess) -> Iterator[BotUnderTest]:
    with SlackStandin() as standin:
        served = serve_bot(standin, replay_daemon.url, replay_daemon.token, daemon_timeout_s=10.0)
        try:
            yield served
        finally:
            served.server.stop()


def _body() -> ReplayBody:
    command = parse(f"orders {WINDOW} tps=100")
    assert isinstance(command, ReplayCommand)
    return ReplayBody.of(command)


def test_a_replay_is_refused_within_seconds_naming_kafka_and_where(
    replay_daemon: DaemonProcess, kafka_down: str
) -> None:
    started = time.monotonic()
    with replay_daemon.client() as client, pytest.raises(DependencyDown) as refused:
        client.create_replay(OWNER, _body())
    elapsed = time.monotonic() - started

    assert elapsed < A_FEW_SECONDS
    assert refused.value.dependency == "kafka"
    assert refused.value.where == kafka_down
    assert f"Kafka at {kafka_down} is not answering (3 s)" in str(refused.value)


def test_a_plan_answers_503_with_the_dependency_in_the_body(
    replay_daemon: DaemonProcess, kafka_down: str
) -> None:
    response = httpx.post(
        f"{replay_daemon.url}/v1/plans",
        json=_body().model_dump(mode="json", exclude_none=True),
        headers={"Authorization": f"Bearer {replay_daemon.token}", "X-Replay-Actor": OWNER},
        timeout=30,
    )

    assert response.status_code == 503
    assert response.json()["dependency"] == "kafka"
    assert response.json()["where"] == kafka_down
    assert response.json()["error"].startswith(f"Kafka at {kafka_down} is not answering")


def test_the_cli_prints_the_kafka_message_and_exits_one(
    replay_daemon: DaemonProcess, kafka_down: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLAY_DAEMON_URL", replay_daemon.url)
    monkeypatch.setenv("REPLAY_API_TOKEN", replay_daemon.token)
    monkeypatch.setenv("REPLAY_USER", OWNER)
    out, err = io.StringIO(), io.StringIO()

    started = time.monotonic()
    code = main(["orders", WINDOW, "tps=100"], out=out, err=err)

    assert time.monotonic() - started < A_FEW_SECONDS
    assert code == EXIT_FAILED
    assert f"Kafka at {kafka_down} is not answering" in err.getvalue()
    assert "did not answer in time" not in err.getvalue()


def test_a_slash_command_answers_with_the_kafka_message(
    bot_on_replay_daemon: BotUnderTest, kafka_down: str
) -> None:
    started = time.monotonic()
    result = bot_on_replay_daemon.slash(f"orders {WINDOW} tps=100", user=OWNER)
    [reply] = bot_on_replay_daemon.replies(result.key, timeout_s=A_FEW_SECONDS)
    elapsed = time.monotonic() - started

    assert result.response.status_code == 200
    assert elapsed < A_FEW_SECONDS
    assert "The Replay Service is up" in reply["text"]
    assert f"Kafka at {kafka_down} is not answering" in reply["text"]
    assert "did not answer, so I could not" not in reply["text"]


def test_readyz_names_kafka_down_and_the_rest_ok(replay_daemon: DaemonProcess, kafka_down: str) -> None:
    started = time.monotonic()
    response = httpx.get(f"{replay_daemon.url}/readyz", timeout=30)
    elapsed = time.monotonic() - started

    states = response.json()
    assert response.status_code == 503
    assert elapsed < 4.0  # every probe is bounded (2 s) and they run at once
    assert states["kafka"].startswith(f"down: Kafka at {kafka_down} is not answering")
    assert (states["database"], states["table_storage"]) == ("ok", "ok")
    assert httpx.get(f"{replay_daemon.url}/healthz", timeout=5).status_code == 200  # the process is up


def test_unreachable_table_storage_is_named_with_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",  # nothing listens there
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    uri = "s3://lake/orders"

    started = time.monotonic()
    with pytest.raises(DependencyDown) as down:
        ParquetTableStats().count_window_rows(uri, WindowRows("dt", [date(2024, 1, 2)]))

    assert time.monotonic() - started < A_FEW_SECONDS
    assert (down.value.dependency, down.value.where) == ("table_storage", uri)
    assert f"cannot open the source table at {uri}" in str(down.value)
