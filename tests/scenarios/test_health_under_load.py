"""`/healthz` answers while fifty people ask for a slow call at once: a probe never waits on work.

Fifty callers each ask for a `lag` that samples for 5 s. The service's bound on slow calls
(`REPLAY_MAX_SLOW_CALLS`, 16 by default) lets sixteen sample and refuses the others at once with a
429 that names the setting; the probe is answered by the event loop itself meanwhile. (The chaos
suite's `slow calls` scenario raises the bound to fifty and checks the same of every route.)
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor

import httpx
import pytest

from tests.fixtures.daemon import NO_JOBS, DaemonProcess
from tests.fixtures.groups import PER_PARTITION, consume_and_commit, produce
from tests.fixtures.kafka import create_topic, unique_topic

pytestmark = [pytest.mark.kafka, NO_JOBS]

SLOW_CALLS = 50
SAMPLE_S = 5.0
BOUND = 16  # REPLAY_MAX_SLOW_CALLS's default


def _in_flight_once_refusals_are_back(calls: list[Future[httpx.Response]]) -> int:
    """The calls still open once the refused ones have had their 429 (a refusal is immediate, but
    fifty requests on a busy machine take a while to arrive), or when the first samples are nearly
    due: what is left then is what samples."""
    deadline = time.monotonic() + SAMPLE_S - 1.0
    while True:
        open_calls = sum(not call.done() for call in calls)
        if open_calls <= BOUND or time.monotonic() >= deadline:
            return open_calls
        time.sleep(0.05)


def test_health_answers_within_a_second_while_fifty_slow_calls_run(
    replay_daemon: DaemonProcess, kafka_bootstrap: str
) -> None:
    topic, group = unique_topic("health-load"), unique_topic("health-load-group")
    create_topic(kafka_bootstrap, topic, partitions=3)
    produce(kafka_bootstrap, topic, PER_PARTITION)
    consume_and_commit(kafka_bootstrap, topic, group, {0: 10, 1: 10, 2: 10})

    def slow(index: int) -> httpx.Response:
        headers = {"Authorization": f"Bearer {replay_daemon.token}", "X-Replay-Actor": f"U0SLOW{index:03d}"}
        url = f"{replay_daemon.url}/v1/groups/{group}/lag"
        return httpx.get(url, params={"topic": topic, "sample_s": SAMPLE_S}, headers=headers, timeout=60)

    with ThreadPoolExecutor(SLOW_CALLS) as pool:
        calls = [pool.submit(slow, i) for i in range(SLOW_CALLS)]
        sampling = _in_flight_once_refusals_are_back(calls)
        started = time.monotonic()
        health = httpx.get(f"{replay_daemon.url}/healthz", timeout=30)
        waited = time.monotonic() - started
        answers = [call.result() for call in calls]

    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert waited < 1.0, f"/healthz took {waited:.2f} s behind {sampling} sampling calls"
    assert sampling == BOUND
    assert Counter(answer.status_code for answer in answers) == {200: BOUND, 429: SLOW_CALLS - BOUND}
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert "REPLAY_MAX_SLOW_CALLS=16" in refused.text
