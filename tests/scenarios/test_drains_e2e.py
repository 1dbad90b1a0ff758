"""`watch=<group>` end to end: the real daemon, local Spark, the real broker, the Slack stand-in, and a
real consumer group on the live topic that consumes slower than the replay publishes.

The lag rises while the replay publishes and drains after it: the watch's baseline is the group's lag
before the first record, and the group is caught up only once its committed offsets are back there,
which is after the run ended and after the consumer read its last replayed record.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer

from daemon.cli.main import EXIT_OK, main
from daemon.contract.client import DaemonClient
from daemon.contract.models import ReplayBody, RunOut
from scripts.devtools.slack_standin import SlackStandin
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon
from tests.fixtures.kafka import unique_topic
from tests.fixtures.slack import BOT_TOKEN, CHANNEL

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

CONSUMED_PER_S = 15.0  # the slow consumer; the replay publishes a day (300 rows) at 100/s
SEEDS = 3  # one record per partition before the run, consumed and committed: a known baseline of 0


@dataclass
class SlowConsumer:
    """A consumer in group `group` that takes 1/CONSUMED_PER_S s per record and auto-commits."""

    bootstrap: str
    topic: str
    group: str
    stop: threading.Event = field(default_factory=threading.Event)
    consumed: list[float] = field(default_factory=list)  # epoch seconds of each record read
    thread: threading.Thread | None = None

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 300,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                message = consumer.poll(0.2)
                if message is None or message.error() is not None:
                    continue
                self.consumed.append(time.time())
                time.sleep(1 / CONSUMED_PER_S)
        finally:
            consumer.close()  # commits what it read

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()


@pytest.fixture(scope="module")
def watch_daemon(
    tmp_path_factory: pytest.TempPathFactory, sample_table: Path, kafka_bootstrap: str, slack: SlackStandin
) -> Iterator[DaemonProcess]:
    daemon = running_daemon(
        tmp_path_factory.mktemp("replayd-watch"),
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        extra={
            "REPLAY_SLACK_BOT_TOKEN": BOT_TOKEN,
            "REPLAY_SLACK_API_URL": slack.base_url,
            "REPLAY_WATCH_INTERVAL_S": "1",
            "REPLAY_PROGRESS_NOTIFY_EVERY_S": "1",
            "REPLAY_WATCHER_POLL_S": "0.5",
        },
    )
    try:
        yield daemon
    finally:
        daemon.stop()


def _live_topic(daemon: DaemonProcess) -> str:
    catalog = yaml.safe_load((daemon.state_dir.parent / "sources.yaml").read_text())
    return str(catalog["sources"]["orders"]["live_topic"])


def _seed(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(SEEDS):
        producer.produce(topic, value=b"seed", partition=partition)
    assert producer.flush(10) == 0


def _wait(client: DaemonClient, run_id: str, done: Callable[[RunOut], bool], timeout_s: float) -> RunOut:
    deadline = time.monotonic() + timeout_s
    run = client.get_replay(OWNER, run_id)
    while not done(run):
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} did not get there within {timeout_s}s: {run}")
        time.sleep(0.5)
        run = client.get_replay(OWNER, run_id)
    return run


def test_a_watched_group_catches_up_after_the_run_and_the_thread_says_when(
    watch_daemon: DaemonProcess, kafka_bootstrap: str, slack: SlackStandin, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = _live_topic(watch_daemon)
    group = unique_topic("orders-consumer")
    _seed(kafka_bootstrap, topic)
    consumer = SlowConsumer(kafka_bootstrap, topic, group)
    consumer.start()
    try:
        slack.wait_until(lambda: len(consumer.consumed) >= SEEDS, timeout_s=30, what="the seeds consumed")
        time.sleep(1.0)  # their offsets committed: the baseline is a known 0
        body = ReplayBody(
            source="orders",
            window="2024-01-02",
            tps=100,
            topic="live",
            confirm_live=True,
            watch=[group],
            slack_channel=CHANNEL,
        )
        with watch_daemon.client() as client:
            created = client.create_replay(OWNER, body)
            ended = _wait(client, created.id, lambda r: r.terminal, timeout_s=240)
            assert ended.state == "succeeded", ended.failure_reason
            assert [(w.group, w.baseline) for w in ended.watch] == [(group, 0)]
            watched = _wait(
                client, created.id, lambda r: r.watch[0].state in ("caught_up", "timed_out"), timeout_s=120
            )
            monkeypatch.setenv("REPLAY_DAEMON_URL", watch_daemon.url)
            monkeypatch.setenv("REPLAY_API_TOKEN", watch_daemon.token)
            out, err = io.StringIO(), io.StringIO()
            code = main(["--as", OWNER, "status", created.id], out=out, err=err)
    finally:
        consumer.stop.set()
        assert consumer.thread is not None
        consumer.thread.join(timeout=10)

    [result] = watched.watch
    assert result.state == "caught_up", result
    assert ended.ended_at is not None and result.caught_up_at is not None
    last_read = datetime.fromtimestamp(consumer.consumed[-1], tz=UTC)
    assert ended.confirmed is not None
    assert len(consumer.consumed) == SEEDS + ended.confirmed  # it read every replayed record...
    assert last_read > ended.ended_at  # ...the last of them after the run had ended...
    assert result.caught_up_at >= last_read.replace(microsecond=0)  # ...and only then was it caught up
    assert (result.lag, result.baseline) == (0, 0)  # no other producer: back to exactly its baseline
    assert result.caught_up_after_s is not None and result.caught_up_after_s > 0
    at = result.caught_up_at.strftime("%H:%M:%S")
    assert (code, err.getvalue()) == (EXIT_OK, "")
    assert f"watch {group}: caught_up, lag 0 (baseline 0), caught up at {at} UTC" in out.getvalue()

    assert watched.slack_ts is not None
    thread = slack.wait_until(
        lambda: (t := slack.render_thread(CHANNEL, watched.slack_ts or "")) and "caught up at" in t and t,
        timeout_s=15,
        what="the caught-up line",
    )
    assert f"Consumers after {created.id}" in thread  # the watch message, edited to its end
    assert f"`{group}` caught up at {at} UTC" in thread
    assert "after the last event" in thread
    shown = [json.dumps(c.params) for c in slack.calls() if c.method in ("chat.postMessage", "chat.update")]
    assert any(
        "Consumers catching up" in text and "draining" in text for text in shown
    )  # lag while it drained
