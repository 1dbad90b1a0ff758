"""`replayd` reads its catalog again on SIGHUP: a real daemon process, its log, and GET /v1/sources."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from daemon.contract.models import ReplayBody, ScheduleBody
from daemon.core.errors import BadRequest, Forbidden
from daemon.core.grammar import ReplayCommand
from daemon.core.windows import parse_window
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon

pytestmark = pytest.mark.kafka

WAIT_S = 15.0


@pytest.fixture
def daemon(tmp_path: Path, sample_table: Path, kafka_bootstrap: str) -> Iterator[DaemonProcess]:
    process = running_daemon(tmp_path, sample_table=sample_table, bootstrap=kafka_bootstrap)
    try:
        yield process
    finally:
        process.stop()


def _catalog_path(daemon: DaemonProcess) -> Path:
    return Path(daemon.env["REPLAY_CATALOG_PATH"])


def _catalog(daemon: DaemonProcess) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(_catalog_path(daemon).read_text())
    return loaded


def _write(daemon: DaemonProcess, catalog: dict[str, Any] | str) -> None:
    text = catalog if isinstance(catalog, str) else yaml.safe_dump(catalog)
    _catalog_path(daemon).write_text(text)


def _sources(daemon: DaemonProcess) -> dict[str, dict[str, Any]]:
    response = httpx.get(
        f"{daemon.url}/v1/sources",
        headers={"Authorization": f"Bearer {daemon.token}", "X-Replay-Actor": OWNER},
        timeout=10,
    )
    response.raise_for_status()
    return {source["name"]: source for source in response.json()["sources"]}


def _log_events(daemon: DaemonProcess, event: str) -> list[dict[str, Any]]:
    found = []
    for line in daemon.log_text().splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if str(record.get("event", "")).startswith(event):
                found.append(record)
    return found


def _hang_up_and_wait(daemon: DaemonProcess, event: str, before: int) -> dict[str, Any]:
    """SIGHUP, then the first new log record whose event starts with `event`."""
    assert daemon.process is not None
    daemon.process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        records = _log_events(daemon, event)
        if len(records) > before:
            return records[before]
        time.sleep(0.1)
    raise AssertionError(f"no '{event}' in the log {WAIT_S}s after SIGHUP:\n{daemon.log_text()[-3000:]}")


def _reload(daemon: DaemonProcess, change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    catalog = _catalog(daemon)
    change(catalog)
    _write(daemon, catalog)
    return _hang_up_and_wait(daemon, "catalog reloaded", len(_log_events(daemon, "catalog reloaded")))


def test_a_new_source_is_served_after_sighup_and_the_log_says_what_changed(daemon: DaemonProcess) -> None:
    assert set(_sources(daemon)) == {"orders"}

    def add_payments(catalog: dict[str, Any]) -> None:
        orders = catalog["sources"]["orders"]
        catalog["sources"]["payments"] = {**orders, "description": "payments", "live_topic": "payments"}
        orders["description"] = "orders, described again"

    logged = _reload(daemon, add_payments)

    assert (logged["added"], logged["removed"], logged["changed"]) == (["payments"], [], ["orders"])
    assert logged["sources"] == 2
    served = _sources(daemon)
    assert set(served) == {"orders", "payments"}
    assert served["orders"]["description"] == "orders, described again"
    assert daemon.process is not None and daemon.process.poll() is None  # SIGHUP did not end it


def test_a_removed_source_is_refused_from_then_on(daemon: DaemonProcess) -> None:
    def add_payments(catalog: dict[str, Any]) -> None:
        catalog["sources"]["payments"] = {**catalog["sources"]["orders"], "live_topic": "payments"}

    _reload(daemon, add_payments)
    logged = _reload(daemon, lambda catalog: catalog["sources"].pop("orders"))

    assert (logged["added"], logged["removed"], logged["changed"]) == ([], ["orders"], [])
    with daemon.client() as client, pytest.raises(BadRequest, match="orders"):
        client.plan(OWNER, ReplayBody.of(ReplayCommand("orders", parse_window("2024-01-01"))))
    assert set(_sources(daemon)) == {"payments"}


def test_the_same_file_again_reloads_and_says_nothing_changed(daemon: DaemonProcess) -> None:
    logged = _reload(daemon, lambda catalog: None)

    assert logged["event"] == "catalog reloaded: nothing changed"
    assert (logged["added"], logged["removed"], logged["changed"]) == ([], [], [])


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (
            lambda c: c["sources"]["orders"].update(owners=["bob"]),
            "source 'orders': field 'owners': Value error, 'bob' is not a Slack user id",
        ),
        ("sources: [unclosed", "not valid YAML"),
        (lambda c: c["sources"].update({"Bad Name": c["sources"]["orders"]}), "source names are lower-case"),
    ],
)
def test_a_bad_catalog_is_refused_naming_the_problem_and_the_good_one_stays(
    daemon: DaemonProcess, bad: Callable[[dict[str, Any]], object] | str, problem: str
) -> None:
    before = _sources(daemon)
    if isinstance(bad, str):
        _write(daemon, bad)
    else:
        catalog = _catalog(daemon)
        bad(catalog)
        _write(daemon, catalog)

    logged = _hang_up_and_wait(daemon, "catalog reload refused", 0)

    assert logged["level"] == "error"
    assert problem in logged["problem"]
    assert str(_catalog_path(daemon)) in logged["problem"]
    assert _sources(daemon) == before
    with daemon.client() as client:  # the old catalog still plans
        plan = client.plan(OWNER, ReplayBody.of(ReplayCommand("orders", parse_window("2024-01-01"))))
    assert plan.rows == 300


def test_a_pipeline_answers_to_its_sources_owners_as_the_catalog_says_now(daemon: DaemonProcess) -> None:
    """An owner removed by a reload loses their say over the source's pipelines; one added gains it."""
    newcomer = "U0NEWOWNER"
    with daemon.client() as client:
        pipeline, _ = client.schedule_once(
            OWNER,
            ScheduleBody(source="orders", cron="0 0 1 1 *", watermark="updated_at"),
            idempotency_key="owners-now",
        )
        with pytest.raises(Forbidden):
            client.pipeline_action(newcomer, pipeline.id, "pause")

        def hand_over(catalog: dict[str, Any]) -> None:
            catalog["sources"]["orders"]["owners"] = [newcomer]

        _reload(daemon, hand_over)

        with pytest.raises(Forbidden, match="only the owners of pipeline"):
            client.pipeline_action(OWNER, pipeline.id, "run")
        assert client.pipeline_action(newcomer, pipeline.id, "pause").state == "paused"
        assert client.unschedule(newcomer, pipeline.id, confirm=True).state == "archived"
