"""The API's front door on the real daemon: credentials first, then a capped body (`api_guard`)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx

from daemon.runtime.api_guard import MAX_BODY_BYTES
from tests.fixtures.daemon import OWNER, DaemonProcess


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
