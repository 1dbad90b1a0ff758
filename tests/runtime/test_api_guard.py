"""The API's front door on the real daemon: credentials first, then a capped body (`api_guard`)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import httpx
import pytest
from pydantic import ValidationError

from daemon.config.settings import Settings
from daemon.runtime.api_guard import MAX_BODY_BYTES, ApiKeys
from daemon.runtime.server import main as server_main
from tests.fixtures.daemon import ADMIN, NO_JOBS, OWNER, OWNER_TOKEN, DaemonProcess
from tests.fixtures.runs import daemon_store

pytestmark = [NO_JOBS]


def _runs(daemon: DaemonProcess) -> set[str]:
    with daemon.client() as client:
        return {run.id for run in client.list_replays(OWNER, limit=200).runs}


def test_no_token_is_401_whatever_the_body(replay_daemon: DaemonProcess) -> None:
    answer = httpx.post(f"{replay_daemon.url}/v1/replays", content=b"x" * (4 * MAX_BODY_BYTES), timeout=10)
    assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"
    assert answer.json() == {"error": "missing or invalid bearer token"}


def test_a_body_over_the_cap_is_413_and_creates_nothing(replay_daemon: DaemonProcess) -> None:
    before = _runs(replay_daemon)
    headers = {"Authorization": f"Bearer {replay_daemon.token}", "X-Replay-Actor": OWNER}
    body = {"source": "orders", "window": "2024-01-02", "headers": {f"h{i}": "v" * 900 for i in range(80)}}
    sized = httpx.post(f"{replay_daemon.url}/v1/replays", json=body, headers=headers, timeout=10)

    def chunks() -> Iterator[bytes]:  # no Content-Length: the cap holds while reading
        payload = json.dumps(body).encode()
        for start in range(0, len(payload), 8192):
            yield payload[start : start + 8192]

    chunked = httpx.post(f"{replay_daemon.url}/v1/replays", content=chunks(), headers=headers, timeout=10)

    assert sized.status_code == chunked.status_code == 413
    assert f"over {MAX_BODY_BYTES:,} bytes" in sized.json()["error"]
    assert _runs(replay_daemon) == before


def test_a_small_authenticated_request_passes_the_door(replay_daemon: DaemonProcess) -> None:
    headers = {"Authorization": f"Bearer {replay_daemon.token}", "X-Replay-Actor": OWNER}
    answer = httpx.post(
        f"{replay_daemon.url}/v1/plans", json={"source": "orders", "window": "2024-01-02"}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["rows"] == 300


# --- whose token: a personal token acts as its owner only (the service token is the bot's)


def _as(token: str, actor: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"}
    if actor is not None:
        headers["X-Replay-Actor"] = actor
    return headers


def test_a_personal_token_acts_as_its_owner_with_or_without_the_actor_header(
    replay_daemon: DaemonProcess,
) -> None:
    plan = {"source": "orders", "window": "2024-01-02"}
    bare = httpx.post(f"{replay_daemon.url}/v1/plans", json=plan, headers=_as(OWNER_TOKEN), timeout=10)
    named = httpx.post(
        f"{replay_daemon.url}/v1/plans", json=plan, headers=_as(OWNER_TOKEN, OWNER), timeout=10
    )
    assert bare.status_code == named.status_code == 200, (bare.text, named.text)
    mine = httpx.get(f"{replay_daemon.url}/v1/replays", headers=_as(OWNER_TOKEN), timeout=10)
    assert mine.status_code == 200


def test_a_personal_token_cannot_act_as_anyone_else_and_creates_nothing(replay_daemon: DaemonProcess) -> None:
    before = _runs(replay_daemon)
    body = {"source": "orders", "window": "2024-01-02", "tps": 10}
    borrowed = httpx.post(
        f"{replay_daemon.url}/v1/replays", json=body, headers=_as(OWNER_TOKEN, ADMIN), timeout=10
    )
    assert borrowed.status_code == 403
    assert borrowed.json()["error"] == (
        f"this token is <@{OWNER}>'s: it acts as its owner only, not as <@{ADMIN}>"
    )
    assert _runs(replay_daemon) == before


def test_an_unknown_token_is_401_and_the_service_token_still_needs_an_actor(
    replay_daemon: DaemonProcess,
) -> None:
    plan = {"source": "orders", "window": "2024-01-02"}
    unknown = httpx.post(
        f"{replay_daemon.url}/v1/plans", json=plan, headers=_as("rpl_nobody", OWNER), timeout=10
    )
    service = httpx.post(
        f"{replay_daemon.url}/v1/plans", json=plan, headers=_as(replay_daemon.token), timeout=10
    )
    assert unknown.status_code == 401
    assert service.status_code == 400 and "X-Replay-Actor" in service.json()["error"]


def test_replayd_token_prints_a_token_and_the_entry_that_admits_exactly_it() -> None:
    out = io.StringIO()
    assert server_main(["token", "U0NEWUSER"], out=out) == 0
    lines = out.getvalue().splitlines()
    token = lines[0].rsplit(": ", 1)[1]
    entry = lines[1].rsplit(": ", 1)[1]
    settings = Settings(user_tokens=[entry])
    keys = ApiKeys(service=b"service", personal=settings.user_token_digests())
    assert keys.caller(f"Bearer {token}") == "U0NEWUSER"
    assert keys.caller(f"Bearer {token}x") is None
    assert token not in entry  # the settings hold a hash, never the token


def test_replayd_token_refuses_what_is_not_a_user_id() -> None:
    err = io.StringIO()
    assert server_main(["token", "not a user"], out=io.StringIO(), err=err) == 2
    assert "is not a Slack user id" in err.getvalue()


def test_a_malformed_user_token_entry_is_refused_at_start_up() -> None:
    with pytest.raises(ValidationError, match="replayd token"):
        Settings(user_tokens=["U0OWNER1:not-a-digest"])


def test_the_audit_log_names_the_credential_beside_the_actor(replay_daemon: DaemonProcess) -> None:
    missing = "r-00000000c0de"
    own = httpx.post(f"{replay_daemon.url}/v1/replays/{missing}/cancel", headers=_as(OWNER_TOKEN), timeout=10)
    vouched = httpx.post(
        f"{replay_daemon.url}/v1/replays/{missing}/cancel",
        headers=_as(replay_daemon.token, OWNER),
        timeout=10,
    )
    assert own.status_code == vouched.status_code == 404

    with daemon_store(replay_daemon) as store:
        entries = [e for e in store.audit.list(actor=OWNER) if e.target == missing]
    assert sorted(e.detail["credential"] for e in entries) == ["personal", "service"]


# --- what a body may say about other people: only the service credential vouches (issue: forged approvals)


def test_a_personal_token_cannot_name_a_second_owners_approval(replay_daemon: DaemonProcess) -> None:
    """Owner A with A's own token sends `approved_by: B`: refused under A, nothing in B's name."""
    before = _runs(replay_daemon)
    body = {
        "source": "orders",
        "window": "2024-01-02",
        "tps": 10,
        "topic": "live",
        "confirm_live": True,
        "approved_by": ADMIN,
    }
    forged = httpx.post(f"{replay_daemon.url}/v1/replays", json=body, headers=_as(OWNER_TOKEN), timeout=10)

    assert forged.status_code == 403, forged.text
    assert "cannot name who approved" in forged.json()["error"]
    assert _runs(replay_daemon) == before
    with daemon_store(replay_daemon) as store:
        in_their_name = store.audit.list(500, actor=ADMIN)
        mine = store.audit.list(5, actor=OWNER)
    assert not [e for e in in_their_name if e.action == "approve"]
    latest = mine[0]
    assert (latest.action, latest.outcome, latest.detail["credential"]) == ("replay", "refused", "personal")


def test_a_personal_token_cannot_choose_the_slack_channel_of_a_run_or_a_pipeline(
    replay_daemon: DaemonProcess,
) -> None:
    before = _runs(replay_daemon)
    replay = {"source": "orders", "window": "2024-01-02", "tps": 10, "slack_channel": "C0ELSEWHERE"}
    schedule = {"source": "orders", "every": "1h", "watermark": "updated_at", "slack_channel": "C0ELSEWHERE"}
    run = httpx.post(f"{replay_daemon.url}/v1/replays", json=replay, headers=_as(OWNER_TOKEN), timeout=10)
    pipeline = httpx.post(
        f"{replay_daemon.url}/v1/pipelines", json=schedule, headers=_as(OWNER_TOKEN), timeout=10
    )
    mine = httpx.get(f"{replay_daemon.url}/v1/pipelines", headers=_as(OWNER_TOKEN), timeout=10)

    assert run.status_code == pipeline.status_code == 403, (run.text, pipeline.text)
    assert "cannot choose the Slack channel" in run.json()["error"]
    assert "cannot choose the Slack channel" in pipeline.json()["error"]
    assert _runs(replay_daemon) == before
    assert all(p["slack_channel"] != "C0ELSEWHERE" for p in mine.json()["pipelines"])
