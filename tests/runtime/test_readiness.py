"""`/readyz`: each dependency's state on its own, 200 only when every configured one answers; probes
run at once and each is bounded. Real things only: the daemon process, the test run's broker (stopped
and started again), the moto server for EMR Serverless and KMS, and ports nothing listens on."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from daemon.adapters.kafka_topic_admin import KafkaTopicAdmin
from daemon.config.settings import load_settings
from daemon.runtime.readiness import Readiness, readiness_for
from daemon.usecases.catalog import load_catalog
from store import Store
from tests.fixtures.daemon import NO_JOBS, DaemonProcess, free_port, write_catalog
from tests.fixtures.kafka import LocalBroker

pytestmark = [NO_JOBS]

READY = {
    "kafka": "ok",
    "database": "ok",
    "table_storage": "ok",
    "kms": "not configured",
    "emr": "not configured",
}


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word: a dependency that hangs."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        stop = threading.Event()
        held: list[socket.socket] = []

        def accept() -> None:
            server.settimeout(0.2)
            while not stop.is_set():
                try:
                    held.append(server.accept()[0])
                except TimeoutError:
                    continue

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        yield int(server.getsockname()[1])
        stop.set()
        thread.join(timeout=2)
        for connection in held:
            connection.close()


@pytest.mark.kafka
def test_a_healthy_daemon_is_ready_with_each_dependency_named(replay_daemon: DaemonProcess) -> None:
    response = httpx.get(f"{replay_daemon.url}/readyz", timeout=10)

    assert (response.status_code, response.json()) == (200, READY)


@pytest.mark.kafka
def test_readyz_follows_the_broker_down_and_back(
    replay_daemon: DaemonProcess, broker_control: LocalBroker
) -> None:
    with broker_control.stopped():
        started = time.monotonic()
        down = httpx.get(f"{replay_daemon.url}/readyz", timeout=30)
        elapsed = time.monotonic() - started
        health = httpx.get(f"{replay_daemon.url}/healthz", timeout=5)

    assert down.status_code == 503 and elapsed < 4.0
    assert down.json()["kafka"].startswith(
        f"down: Kafka at {broker_control.bootstrap} is not answering (2 s)"
    )
    assert health.status_code == 200  # the process is up: /healthz never asks the dependencies
    deadline = time.monotonic() + 30
    while (back := httpx.get(f"{replay_daemon.url}/readyz", timeout=10)).status_code != 200:
        assert time.monotonic() < deadline, back.json()
        time.sleep(0.5)
    assert back.json() == READY


def test_probes_run_at_once_and_a_silent_one_is_down_after_its_bound(silent_port: int) -> None:
    silent = {"bootstrap.servers": f"127.0.0.1:{silent_port}"}
    readiness = Readiness(
        probes={
            "kafka": KafkaTopicAdmin(config=silent, timeout_s=1.0).ping,
            "table_storage": KafkaTopicAdmin(config=silent, timeout_s=1.0).ping,
            "hangs": lambda: time.sleep(30),
            "kms": None,
        },
        timeout_s=1.0,
    )

    started = time.monotonic()
    states = readiness.check()
    elapsed = time.monotonic() - started

    assert elapsed < 2.0  # three probes of 1 s each (one never returns), side by side
    assert states["kafka"] == f"down: Kafka at 127.0.0.1:{silent_port} is not answering (1 s)"
    assert states["table_storage"] == states["kafka"]
    assert states["hangs"] == "down: no answer within 1 s"
    assert states["kms"] == "not configured"
    assert not Readiness.ready(states)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dummy credentials: the probes sign their requests like any AWS call."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def _states(tmp_path: Path, sample_table: Path, endpoint: str, **source_extra: object) -> dict[str, str]:
    """`/readyz`'s answer for an EMR daemon whose AWS endpoint is `endpoint` (no broker listening)."""
    catalog_path = write_catalog(
        tmp_path / "sources.yaml", sample_table, live_topic="orders-live", source_extra=source_extra
    )
    settings = load_settings(
        {},
        state_dir=tmp_path / "state",
        catalog_path=catalog_path,
        kafka_bootstrap=f"127.0.0.1:{free_port()}",
        database_url=f"sqlite:///{tmp_path / 'replay.db'}",
        launcher="emr",
        emr={"endpoint_url": endpoint, "region": "us-east-1"},
    )
    store = Store(settings.db_url)
    try:
        catalog = load_catalog(catalog_path)
        return readiness_for(settings, store=store, catalog=catalog).check()
    finally:
        store.close()


def test_emr_and_kms_are_probed_when_configured(
    tmp_path: Path, sample_table: Path, moto_server: str, aws_env: None
) -> None:
    encrypted = {"customer_id": {"key_ref": "alias/replay-pii"}}
    states = _states(tmp_path, sample_table, moto_server, encrypted_columns=encrypted)

    assert (states["emr"], states["kms"], states["table_storage"], states["database"]) == ("ok",) * 4
    assert states["kafka"].startswith("down: Kafka at 127.0.0.1:")


def test_an_unreachable_emr_endpoint_is_named(tmp_path: Path, sample_table: Path, aws_env: None) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there

    states = _states(tmp_path, sample_table, endpoint)

    assert states["emr"].startswith(f"down: EMR Serverless at {endpoint}")
    assert states["kms"] == "not configured"
    assert states["database"] == "ok"


@pytest.mark.kafka
def test_each_named_kafka_cluster_is_probed_on_its_own(
    tmp_path: Path, sample_table: Path, kafka_bootstrap: str
) -> None:
    """The cluster that is down is the one named: the default one answers, `staging` does not."""
    catalog_path = write_catalog(tmp_path / "sources.yaml", sample_table, live_topic="orders-live")
    away = f"127.0.0.1:{free_port()}"  # nothing listens there
    settings = load_settings(
        {},
        state_dir=tmp_path / "state",
        catalog_path=catalog_path,
        kafka_bootstrap=kafka_bootstrap,
        kafka_clusters={"staging": {"bootstrap": away}},
        database_url=f"sqlite:///{tmp_path / 'replay.db'}",
    )
    store = Store(settings.db_url)
    try:
        states = readiness_for(settings, store=store, catalog=load_catalog(catalog_path), timeout_s=2).check()
    finally:
        store.close()

    assert states["kafka"] == "ok"
    assert states["kafka:staging"].startswith(f"down: Kafka at {away}")
