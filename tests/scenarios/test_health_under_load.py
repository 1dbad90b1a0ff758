"""`/healthz` answers while slow calls fill the request pool: an orchestrator's probe never waits on work.

Fifty `lag` calls that each sample for 5 s hold every worker thread of the API (40); the probe is
answered by the event loop itself, so it does not queue behind them.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.fixtures.daemon import OWNER, DaemonProcess
from tests.fixtures.groups import PER_PARTITION, consume_and_commit, produce
from tests.fixtures.kafka import create_topic, unique_topic

pytestmark = [pytest.mark.kafka]

SLOW_CALLS = 50
SAMPLE_S = 5.0


def test_health_answers_within_a_second_while_fifty_slow_calls_run(
    replay_daemon: DaemonProcess, kafka_bootstrap: str
) -> None:
    topic, group = unique_topic("health-load"), unique_topic("health-load-group")
    create_topic(kafka_bootstrap, topic, partitions=3)
    produce(kafka_bootstrap, topic, PER_PARTITION)
    consume_and_commit(kafka_bootstrap, topic, group, {0: 10, 1: 10, 2: 10})
    headers = {"Authorization": f"Bearer {replay_daemon.token}", "X-Replay-Actor": OWNER}

    def slow(_: int) -> int:
        url = f"{replay_daemon.url}/v1/groups/{group}/lag"
        answer = httpx.get(url, params={"topic": topic, "sample_s": SAMPLE_S}, headers=headers, timeout=60)
        return answer.status_code

    with ThreadPoolExecutor(SLOW_CALLS) as pool:
        calls = [pool.submit(slow, i) for i in range(SLOW_CALLS)]
        time.sleep(1.5)  # every slow call is in, sampling
        assert not any(call.done() for call in calls)
        started = time.monotonic()
        health = httpx.get(f"{replay_daemon.url}/healthz", timeout=30)
        waited = time.monotonic() - started
        statuses = [call.result() for call in calls]

    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert waited < 1.0, f"/healthz took {waited:.2f} s behind {SLOW_CALLS} slow calls"
    assert statuses == [200] * SLOW_CALLS
