"""`tps=auto` requests the service refuses before creating anything: a new topic (no consumer could be
behind on it) and a ceiling above the platform's maximum."""

from __future__ import annotations

import pytest

from daemon.contract.models import AutoBody, ReplayBody
from daemon.core.errors import BadRequest
from tests.fixtures.daemon import NO_JOBS, OWNER, DaemonProcess

pytestmark = [pytest.mark.kafka, NO_JOBS]


def _runs(daemon: DaemonProcess) -> set[str]:
    with daemon.client() as client:
        return {run.id for run in client.list_replays(OWNER, limit=200).runs}


@pytest.mark.parametrize(
    ("topic", "ceiling", "message"),
    [("auto", 2_000, "replay with topic=live"), ("live", 10_000_000, "above this platform's maximum")],
)
def test_a_refused_auto_request_creates_nothing(
    replay_daemon: DaemonProcess, topic: str, ceiling: int, message: str
) -> None:
    before = _runs(replay_daemon)
    body = ReplayBody(
        source="orders",
        window="2024-01-02",
        topic=topic,  # type: ignore[arg-type]  # parametrized: one of the two literals
        confirm_live=True,
        auto=AutoBody(max=ceiling, lag_below=1_000, group="orders-consumer"),
    )
    with replay_daemon.client() as client, pytest.raises(BadRequest, match=message):
        client.create_replay(OWNER, body)
    assert _runs(replay_daemon) == before
