"""`/metrics` of a real daemon: a new run is on it with its labels and target rate; the Grafana dashboard
under docs/ queries only series that a scrape exports, and docs/production.md's table lists exactly those."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from daemon.contract.models import ReplayBody
from daemon.core.grammar import ReplayCommand, parse
from tests.fixtures.daemon import OWNER, DaemonProcess

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "docs" / "grafana" / "replay.json"
SERIES = re.compile(r"\breplay_[a-z_]+\b")


def _scrape(daemon: DaemonProcess) -> str:
    response = httpx.get(f"{daemon.url}/metrics", timeout=10)
    assert response.status_code == 200
    return response.text


def _exported(text: str) -> set[str]:
    """Every series name the scrape declares (`# TYPE <name> …`), with or without samples."""
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def _queries(node: Any) -> Iterator[str]:
    """Every PromQL string of the dashboard: panel targets' `expr` and template variables' queries."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                yield value
            elif key == "query" and isinstance(value, str | dict):
                yield from ([value] if isinstance(value, str) else _queries(value))
            else:
                yield from _queries(value)
    elif isinstance(node, list):
        for item in node:
            yield from _queries(item)


@pytest.fixture(scope="module")
def queued_run(replay_daemon: DaemonProcess) -> Iterator[str]:
    """A replay the daemon accepted, cancelled once the module is done with it."""
    command = parse("orders 2024-01-02 tps=123")
    assert isinstance(command, ReplayCommand)
    with replay_daemon.client() as client:
        run = client.create_replay(OWNER, ReplayBody.of(command))
        try:
            yield run.id
        finally:
            client.cancel_replay(OWNER, run.id)


def test_a_new_run_is_scraped_with_its_id_source_and_target_rate(
    replay_daemon: DaemonProcess, queued_run: str
) -> None:
    text = _scrape(replay_daemon)

    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    mine = {s.name: s for s in samples if s.labels.get("run_id") == queued_run}
    assert mine["replay_run_target_events_per_second"].value == 123
    assert mine["replay_run_target_events_per_second"].labels == {"run_id": queued_run, "source": "orders"}
    assert mine["replay_run_info"].labels["topic"] == f"replay.orders.{queued_run}"
    assert "replay_run_events_confirmed_total" in mine


def test_the_dashboard_queries_only_series_a_real_scrape_exports(
    replay_daemon: DaemonProcess, queued_run: str
) -> None:
    exported = _exported(_scrape(replay_daemon))
    queried = {
        name for query in _queries(json.loads(DASHBOARD.read_text())) for name in SERIES.findall(query)
    }

    assert queried - exported == set()
    assert {
        "replay_run_target_events_per_second",
        "replay_run_achieved_events_per_second",
        "replay_run_state",
        "replay_watch_lag",
    } <= queried


def test_no_dashboard_panel_adds_up_what_every_daemon_exports() -> None:
    # two daemons on one store export the same store-wide values: a panel takes one, never their sum
    panels = json.loads(DASHBOARD.read_text())["panels"]
    queries = [target["expr"] for panel in panels for target in panel.get("targets", [])]
    assert len(queries) >= 10
    for query in queries:
        assert query.startswith("max"), query
        assert "sum" not in query, query


def test_the_guides_metrics_table_lists_every_exported_series(replay_daemon: DaemonProcess) -> None:
    exported = _exported(_scrape(replay_daemon))
    guide = (REPO / "docs" / "production.md").read_text()
    rows = [line for line in guide.splitlines() if line.startswith("| `replay_")]
    documented = {SERIES.findall(row)[0] for row in rows}

    assert documented == exported
