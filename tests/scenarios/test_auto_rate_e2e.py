"""``tps=auto`` end to end: a real consumer slows down mid-run and the daemon slows the replay for it.

The real daemon (local launcher, real Spark) replays into the source's live topic with
``tps=auto max=2000 lag<1000 group=G`` while a real consumer in G reads that topic: as fast as it
likes at first, then at most ``SLOW`` records a second. The daemon samples G's lag and steers the
run's rate through the control topic: the run must lower its rate below what G consumes, keep G's lag
within the bound the controller promises, finish, and reconcile clean — with every decision in the
audit log and on the run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition

from daemon.contract.models import AutoBody, ReplayBody, RunOut
from daemon.core.auto_rate import HOLD_S
from daemon.usecases.auto_steer import SAMPLE_EVERY_S
from scripts.devtools.sample_table import write_sample_table
from store import Store
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon
from tests.fixtures.kafka import unique_topic

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

CEILING, LAG_LIMIT = 2_000, 1_000
FAST_FOR = 2_000  # records the consumer reads at full speed before it slows down
SLOW = 250  # records a second after that
DAYS, ROWS_PER_DAY = 2, 3_500  # 7,000 rows


class SlowingConsumer(threading.Thread):
    """A member of the group: reads the live topic, commits every 100 ms, slows down after FAST_FOR."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.stop = threading.Event()
        self.consumed = 0
        self.lags: list[int] = []  # the group's lag as this consumer saw it, after each commit
        self.error: BaseException | None = None

    def run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
            }
        )
        try:
            consumer.subscribe([self.topic])
            slow_since: float | None = None
            uncommitted = False
            last_commit = time.monotonic()
            while not self.stop.is_set():
                if slow_since is not None:  # at most SLOW a second from when it slowed down
                    allowed = FAST_FOR + int((time.monotonic() - slow_since) * SLOW)
                    if self.consumed >= allowed:
                        time.sleep(0.01)
                        continue
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    self.consumed += 1
                    uncommitted = True
                    if self.consumed == FAST_FOR:
                        slow_since = time.monotonic()
                if uncommitted and time.monotonic() - last_commit >= 0.1:
                    consumer.commit(asynchronous=False)
                    uncommitted = False
                    last_commit = time.monotonic()
                    self.lags.append(self._lag(consumer))
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            consumer.close()

    def _lag(self, consumer: Consumer) -> int:
        total = 0
        for partition in consumer.assignment():
            _, high = consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition.partition), cached=True
            )
            position = consumer.position([TopicPartition(self.topic, partition.partition)])[0].offset
            total += max(0, high - position) if position >= 0 else 0
        return total


@pytest.fixture
def auto_daemon(tmp_path: Path, kafka_bootstrap: str) -> Iterator[DaemonProcess]:
    table = tmp_path / "orders"
    write_sample_table(table, date(2024, 1, 1), DAYS, ROWS_PER_DAY, seed=23)
    daemon = running_daemon(tmp_path / "daemon", sample_table=table, bootstrap=kafka_bootstrap)
    try:
        yield daemon
    finally:
        daemon.stop()


def _finished(daemon: DaemonProcess, run_id: str, timeout_s: float = 240) -> RunOut:
    deadline = time.monotonic() + timeout_s
    with daemon.client() as client:
        while time.monotonic() < deadline:
            run = client.get_replay(OWNER, run_id)
            if run.state in ("succeeded", "failed", "cancelled") and run.reconcile is not None:
                return run
            time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not finish in {timeout_s}s")


def test_a_consumer_that_slows_down_slows_the_replay_and_keeps_its_lag_bounded(
    auto_daemon: DaemonProcess, kafka_bootstrap: str
) -> None:
    catalog = yaml.safe_load(Path(auto_daemon.env["REPLAY_CATALOG_PATH"]).read_text())
    live_topic = str(catalog["sources"]["orders"]["live_topic"])
    group = unique_topic("orders-consumer")
    consumer = SlowingConsumer(kafka_bootstrap, live_topic, group)
    consumer.start()
    time.sleep(3)  # joined and assigned before the first record
    body = ReplayBody(
        source="orders",
        window="2024-01-01..2024-01-02",
        topic="live",
        confirm_live=True,
        auto=AutoBody(max=CEILING, lag_below=LAG_LIMIT, group=group),
    )
    with auto_daemon.client() as client:
        created = client.create_replay(OWNER, body)
    try:
        run = _finished(auto_daemon, created.id)
    finally:
        consumer.stop.set()
        consumer.join(30)

    assert consumer.error is None, consumer.error
    assert run.state == "succeeded", run.failure_reason
    assert run.confirmed == DAYS * ROWS_PER_DAY
    assert run.reconcile is not None and run.reconcile.verdict().clean, run.reconcile
    assert run.tps == CEILING // 4  # it started well under the ceiling
    rates = [change.tps for change in run.rate_changes]
    assert rates and max(rates) <= CEILING
    lowered = [after for before, after in zip([run.tps, *rates], rates, strict=False) if after < before]
    assert lowered and min(lowered) <= SLOW, rates  # below what the slow consumer reads
    with Store(f"sqlite:///{auto_daemon.state_dir / 'replay.db'}") as store:
        decisions = [e for e in store.audit.list(actor="auto") if e.target == run.id]
    assert len(decisions) == len(rates)
    assert any("lag" in e.detail["why"] and ">" in e.detail["why"] for e in decisions)
    # What the controller promises: over the limit for at most one decision period at the fastest rate
    # it had set (sample, hold, the change's lead, and a second of the consumer's own reporting).
    bound = LAG_LIMIT + max([run.tps, *rates]) * (SAMPLE_EVERY_S + HOLD_S + 1.0 + 1.0)
    peak = max(consumer.lags)
    print(f"tps=auto: start {run.tps}/s, decisions {rates}, lag at most {peak} (bound {bound:.0f})")
    for entry in reversed(decisions):
        print(f"  {entry.detail['before']} -> {entry.detail['after']}: {entry.detail['why']}")
    assert max(consumer.lags) <= bound, (max(consumer.lags), bound, rates)
