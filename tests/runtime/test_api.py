"""The Replay Service over real HTTP: validation, authorization, audit, idempotency, end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from daemon.contract.models import ReplayBody
from daemon.core.errors import BadRequest, Conflict, Forbidden, NotFound
from tests.fixtures.daemon import ADMIN, OWNER, STRANGER, DaemonProcess
from tests.fixtures.kafka import consume_all, headers_of, value_of
from tests.fixtures.runs import TERMINAL, daemon_store, replay_topics, wait_for, window_event_ids

pytestmark = [pytest.mark.kafka]


def _body(**overrides: Any) -> dict[str, Any]:
    return {"source": "orders", "window": "2024-01-02..2024-01-03", "tps": 5000, **overrides}


def _request(**overrides: Any) -> ReplayBody:
    return ReplayBody.model_validate(_body(**overrides))


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (_body(source="ordres"), 400, "unknown source 'ordres' (known sources: orders)"),
        (_body(window="2024-01-07..2024-01-01"), 400, "window ends before it starts"),
        (_body(window="2024-13-01..2024-13-02"), 400, "`2024-13-01..2024-13-02`"),
        (_body(window="2023-01-01..2023-01-02"), 422, "no rows of 'orders' in 2023-01-01..2023-01-02"),
        (_body(tps=0), 400, "tps"),
        (_body(tps=-3), 400, "tps"),
        (_body(tps=50_000_000), 400, "tps"),
        (_body(pace=5), 422, "unknown option 'pace'"),
        (_body(speed=0), 400, "speed must be between 0.01x and 100000x"),
        (_body(speed=5, ramp_s=60), 400, "ramp= is for a flat rate"),
        (_body(topic="orders-copy"), 422, "topic"),
        (_body(topic="live"), 409, "needs an explicit confirmation"),
    ],
)
def test_bad_request_is_refused_with_a_clear_message_and_creates_nothing(
    replay_daemon: DaemonProcess, kafka_bootstrap: str, body: dict[str, Any], status: int, message: str
) -> None:
    topics_before = replay_topics(kafka_bootstrap)
    runs_before = httpx.get(
        f"{replay_daemon.url}/v1/replays",
        headers={"Authorization": f"Bearer {replay_daemon.token}", "X-Replay-Actor": OWNER},
    ).json()["runs"]

    response = httpx.post(
        f"{replay_daemon.url}/v1/replays",
        json=body,
        headers={"Authorization": f"Bearer {replay_daemon.token}", "X-Replay-Actor": OWNER},
    )

    assert response.status_code == status, response.text
    assert message in response.json()["error"]
    runs_after = replay_daemon.client().list_replays(OWNER).runs
    assert [r.id for r in runs_after] == [r["id"] for r in runs_before]
    assert replay_topics(kafka_bootstrap) == topics_before


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", "Basic dGVzdA=="])
def test_missing_or_wrong_token_is_401(replay_daemon: DaemonProcess, authorization: str | None) -> None:
    headers = {"X-Replay-Actor": OWNER} | ({"Authorization": authorization} if authorization else {})

    response = httpx.get(f"{replay_daemon.url}/v1/sources", headers=headers)

    assert response.status_code == 401
    assert response.json() == {"error": "missing or invalid bearer token"}


def test_unauthorized_user_is_refused_and_audited(replay_daemon: DaemonProcess) -> None:
    with pytest.raises(Forbidden, match="only the owners of 'orders'"):
        replay_daemon.client().create_replay(STRANGER, _request())

    with daemon_store(replay_daemon) as store:
        entries = store.audit.list(actor=STRANGER)
    assert [(e.action, e.outcome) for e in entries][:1] == [("replay", "refused")]
    assert "only the owners" in entries[0].detail["reason"]


def test_plan_counts_rows_from_metadata_without_creating_anything(
    replay_daemon: DaemonProcess, sample_table: Path
) -> None:
    plan = replay_daemon.client().plan(OWNER, _request(tps=100))

    expected = len(window_event_ids(sample_table, "2024-01-02", "2024-01-03"))
    assert plan.rows == expected
    assert plan.eta_publish_s == pytest.approx(expected / 100)
    assert plan.eta_startup_s is not None and plan.eta_startup_s > 0
    assert plan.eta_s > expected / 100  # start-up included
    assert plan.topic_mode == "auto"
    assert replay_daemon.client().list_replays(OWNER, state="queued").runs == []


def test_plan_refuses_a_bad_window_like_a_replay(replay_daemon: DaemonProcess) -> None:
    with pytest.raises(BadRequest, match="window ends before it starts"):
        replay_daemon.client().plan(OWNER, _request(window="2024-01-03..2024-01-02"))


def test_sources_lists_the_catalog(replay_daemon: DaemonProcess) -> None:
    sources = replay_daemon.client().sources(OWNER)

    assert [s.name for s in sources] == ["orders"]
    assert sources[0].owners == [OWNER]
    assert (sources[0].table_format, sources[0].snapshot, sources[0].snapshot_unreadable) == (
        "parquet",
        None,
        None,
    )


def test_idempotency_key_retry_returns_the_same_run(replay_daemon: DaemonProcess) -> None:
    client = replay_daemon.client()

    first = client.create_replay(ADMIN, _request(tps=200), idempotency_key="slack-trigger-1")
    second = client.create_replay(ADMIN, _request(tps=200), idempotency_key="slack-trigger-1")

    assert second.id == first.id
    assert (first.created, second.created) == (True, False)
    assert [r.id for r in client.list_replays(ADMIN, requester=ADMIN).runs].count(first.id) == 1
    client.cancel_replay(ADMIN, first.id)
    assert wait_for(client, first.id, TERMINAL).state in TERMINAL


def test_an_idempotency_key_reused_for_another_request_is_422_and_creates_nothing(
    replay_daemon: DaemonProcess,
) -> None:
    client = replay_daemon.client()
    first = client.create_replay(ADMIN, _request(tps=200), idempotency_key="slack-trigger-2")
    before = {r.id for r in client.list_replays(ADMIN, limit=200).runs}

    with httpx.Client(base_url=replay_daemon.url, timeout=30) as http:
        answer = http.post(
            "/v1/replays",
            json=_request(tps=300).model_dump(mode="json", exclude_none=True),
            headers={
                "Authorization": f"Bearer {replay_daemon.token}",
                "X-Replay-Actor": ADMIN,
                "Idempotency-Key": "slack-trigger-2",
            },
        )

    assert answer.status_code == 422
    assert f"was used for `orders 2024-01-02..2024-01-03 tps=200` (run {first.id})" in answer.json()["error"]
    assert "tps=300" in answer.json()["error"]
    assert {r.id for r in client.list_replays(ADMIN, limit=200).runs} == before
    client.cancel_replay(ADMIN, first.id)
    assert wait_for(client, first.id, TERMINAL).state in TERMINAL


def test_reconcile_and_the_chart_refuse_what_they_cannot_do_and_create_nothing(
    replay_daemon: DaemonProcess,
) -> None:
    client = replay_daemon.client()
    running = client.create_replay(ADMIN, _request(tps=50))
    before = {r.id for r in client.list_replays(ADMIN, limit=200).runs}

    with pytest.raises(Conflict, match=f"run {running.id} is still"):
        client.reconcile(ADMIN, running.id)
    with pytest.raises(NotFound):
        client.reconcile(ADMIN, "r-000000000000")
    with pytest.raises(NotFound, match="has no rate series"):
        client.chart_png(ADMIN, running.id)

    assert {r.id for r in client.list_replays(ADMIN, limit=200).runs} == before
    client.cancel_replay(ADMIN, running.id)
    assert wait_for(client, running.id, TERMINAL).state in TERMINAL


def test_cancel_by_a_stranger_is_refused(replay_daemon: DaemonProcess) -> None:
    client = replay_daemon.client()
    run = client.create_replay(OWNER, _request(tps=100))

    with pytest.raises(Forbidden, match="only the requester"):
        client.cancel_replay(STRANGER, run.id)

    client.cancel_replay(OWNER, run.id)
    assert wait_for(client, run.id, TERMINAL).state == "cancelled"


def test_metrics_report_runs_by_state(replay_daemon: DaemonProcess) -> None:
    text = httpx.get(f"{replay_daemon.url}/metrics").text

    assert 'replay_runs{state="succeeded"}' in text
    assert "replay_events_confirmed_total" in text
    assert "replay_launch_failures_total" in text


def test_replay_end_to_end_lands_exactly_the_window(
    replay_daemon: DaemonProcess, kafka_bootstrap: str, sample_table: Path
) -> None:
    client = replay_daemon.client()
    created = client.create_replay(OWNER, _request(window="2024-01-05..2024-01-06", tps=2000))

    run = wait_for(client, created.id, TERMINAL)

    expected = window_event_ids(sample_table, "2024-01-05", "2024-01-06")
    assert run.state == "succeeded", run
    assert run.confirmed == len(expected)
    assert (run.rows_planned, run.rows_selected) == (len(expected), len(expected))
    landed = consume_all(kafka_bootstrap, run.topic, expected=len(expected))
    assert {json.loads(value_of(m))["event_id"] for m in landed} == expected
    assert {headers_of(m)["replay-run-id"] for m in landed} == {run.id.encode()}
    # a clean verdict lists nothing, and says so over the API
    empty = httpx.get(
        f"{replay_daemon.url}/v1/replays/{run.id}/ids/missing",
        headers={"Authorization": f"Bearer {replay_daemon.token}", "X-Replay-Actor": OWNER},
    ).json()
    assert (empty["listed"], empty["ids"], empty["next_after"]) == (0, [], None)


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/v1/replays/r-000000000000/ids/missing", 404, "r-000000000000"),
        ("/v1/replays/r-000000000000/ids/lost", 422, "'missing', 'unexpected' or 'duplicated'"),
        (
            "/v1/replays/r-000000000000/ids/missing?after=-2",
            422,
            "after: Input should be greater than or equal to -1",
        ),
        (
            "/v1/replays/r-000000000000/ids/missing?limit=1001",
            422,
            "limit: Input should be less than or equal to 1000",
        ),
    ],
)
def test_a_verdict_list_asked_for_badly_is_a_clear_error(
    replay_daemon: DaemonProcess, path: str, status: int, message: str
) -> None:
    response = httpx.get(
        f"{replay_daemon.url}{path}",
        headers={"Authorization": f"Bearer {replay_daemon.token}", "X-Replay-Actor": OWNER},
    )

    assert response.status_code == status, response.text
    assert message in response.json()["error"]
