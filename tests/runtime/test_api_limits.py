"""Caps on unfinished runs and the execution timeout, refused before anything exists, over real HTTP.

The caps run against a real daemon with local Spark, one job at a time, so the runs of the test stay
queued or going while the next create is asked for. The execution timeout is EMR Serverless's: a
daemon with `REPLAY_LAUNCHER=emr` (its AWS clients on the session's moto server; nothing is launched)
refuses a plan, and a replay, whose ETA exceeds it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from daemon.contract.models import ReplayBody
from daemon.core.errors import BadRequest, CapReached
from tests.fixtures.aws import EXECUTION_ROLE_ARN, AwsClients
from tests.fixtures.daemon import ADMIN, OWNER, DaemonProcess, running_daemon
from tests.fixtures.runs import TERMINAL, replay_topics, wait_for

pytestmark = [pytest.mark.kafka]

SLOW = ReplayBody(source="orders", window="2024-01-02..2024-01-03", tps=5)  # 600 rows: two minutes


@pytest.fixture(scope="module")
def capped(
    tmp_path_factory: pytest.TempPathFactory, sample_table: Path, kafka_bootstrap: str
) -> Iterator[DaemonProcess]:
    daemon = running_daemon(
        tmp_path_factory.mktemp("capped"),
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        extra={
            "REPLAY_LOCAL_MAX_CONCURRENT_RUNS": "1",
            "REPLAY_MAX_ACTIVE_RUNS_PER_USER": "2",
            "REPLAY_MAX_ACTIVE_RUNS": "3",
        },
    )
    try:
        yield daemon
    finally:
        daemon.stop()


def _post_replay(daemon: DaemonProcess, actor: str, body: ReplayBody) -> httpx.Response:
    with httpx.Client(base_url=daemon.url, timeout=60) as http:
        return http.post(
            "/v1/replays",
            json=body.model_dump(mode="json", exclude_none=True),
            headers={"Authorization": f"Bearer {daemon.token}", "X-Replay-Actor": actor},
        )


def _settled_topics(bootstrap: str, made: set[str], timeout_s: float = 30.0) -> set[str]:
    """The replay topics once the broker's metadata shows the ones just made."""
    deadline = time.monotonic() + timeout_s
    while not made <= (topics := replay_topics(bootstrap)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return topics


@pytest.mark.spark
def test_a_create_over_the_per_user_or_the_total_cap_is_429_naming_the_setting_and_creates_nothing(
    capped: DaemonProcess, kafka_bootstrap: str
) -> None:
    client = capped.client()
    mine = [client.create_replay(OWNER, SLOW) for _ in range(2)]
    try:
        topics = _settled_topics(kafka_bootstrap, {run.topic for run in mine})
        runs = {r.id for r in client.list_replays(ADMIN).runs}

        over_mine = _post_replay(capped, OWNER, SLOW)
        admins = client.create_replay(ADMIN, SLOW)  # an admin is held by the total cap only
        with pytest.raises(CapReached) as over_total:
            client.create_replay(ADMIN, SLOW)

        assert over_mine.status_code == 429
        assert "REPLAY_MAX_ACTIVE_RUNS_PER_USER=2" in over_mine.json()["error"]
        assert "REPLAY_MAX_ACTIVE_RUNS=3" in str(over_total.value)
        assert {r.id for r in client.list_replays(ADMIN).runs} == runs | {admins.id}
        assert _settled_topics(kafka_bootstrap, {admins.topic}) - {admins.topic} == topics
    finally:
        for run in client.list_replays(ADMIN).runs:
            if run.state not in TERMINAL:
                client.cancel_replay(ADMIN, run.id)
    for run in mine:
        wait_for(client, run.id, TERMINAL)

    again = client.create_replay(OWNER, SLOW)  # runs that ended no longer count
    client.cancel_replay(OWNER, again.id)
    assert wait_for(client, again.id, TERMINAL).state == "cancelled"


@pytest.fixture(scope="module")
def on_emr(
    tmp_path_factory: pytest.TempPathFactory,
    sample_table: Path,
    kafka_bootstrap: str,
    aws_clients: AwsClients,
) -> Iterator[DaemonProcess]:
    """`REPLAY_LAUNCHER=emr` with the shortest execution timeout EMR takes (5 minutes)."""
    bucket = f"replay-limits-{uuid.uuid4().hex[:8]}"
    aws_clients.s3.create_bucket(Bucket=bucket)
    emr = {
        "ENDPOINT_URL": aws_clients.endpoint_url,
        "REGION": aws_clients.region,
        "BUCKET": bucket,
        "EXECUTION_ROLE_ARN": EXECUTION_ROLE_ARN,
        "VENV_URI": f"s3://{bucket}/fake/venv.tar.gz",
        "EXECUTION_TIMEOUT_MINUTES": "5",
    }
    extra = {
        "REPLAY_LAUNCHER": "emr",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        **{f"REPLAY_EMR__{key}": value for key, value in emr.items()},
    }
    daemon = running_daemon(
        tmp_path_factory.mktemp("on-emr"), sample_table=sample_table, bootstrap=kafka_bootstrap, extra=extra
    )
    try:
        yield daemon
    finally:
        daemon.stop()


# 300 rows at 1/s: 300 s of publishing + EMR's default 90 s start-up and 10 s wind-down > 5 minutes
TOO_LONG = ReplayBody(source="orders", window="2024-01-02..2024-01-02", tps=1)


def test_a_plan_longer_than_the_emr_execution_timeout_is_refused_with_the_eta_and_what_to_do(
    on_emr: DaemonProcess,
) -> None:
    client = on_emr.client()

    with pytest.raises(BadRequest) as refused:
        client.plan(OWNER, TOO_LONG)
    fits = client.plan(OWNER, TOO_LONG.model_copy(update={"tps": 300}))

    message = str(refused.value)
    assert "would take about 400s (300 rows at 1/s)" in message, message
    assert "execution timeout of 5m" in message
    assert "raise tps to at least 2" in message and "narrow the window" in message
    assert "REPLAY_EMR__EXECUTION_TIMEOUT_MINUTES" in message
    assert fits.rows == 300 and fits.eta_s is not None and fits.eta_s < 300


def test_a_replay_longer_than_the_emr_execution_timeout_is_422_and_creates_nothing(
    on_emr: DaemonProcess, kafka_bootstrap: str
) -> None:
    client = on_emr.client()
    topics = replay_topics(kafka_bootstrap)

    answer = _post_replay(on_emr, OWNER, TOO_LONG)

    assert answer.status_code == 422
    assert "longer than the launcher's execution timeout of 5m" in answer.json()["error"]
    assert client.list_replays(OWNER).runs == []
    assert replay_topics(kafka_bootstrap) == topics
