"""Two Kafka clusters through the real Replay Service: a source whose `cluster:` is the second one has
its runs' topics, progress beacons, live control, dead letters and verdict there and nothing on the
default one;
`lag` and `rewind` find a live topic's cluster from its source, or take `cluster=`; an unknown name is
refused, naming the clusters there are (ADR 0058)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from daemon.contract.groups import RewindBody
from daemon.contract.models import ReplayBody
from daemon.core.errors import BadRequest, NotFound
from tests.fixtures.big_rows import limit_message_bytes, with_big_rows
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon
from tests.fixtures.groups import PER_PARTITION, behind_group, committed, produce
from tests.fixtures.kafka import (
    KEEP_FOREVER,
    consume_all,
    create_topic,
    headers_of,
    topic_names,
    unique_topic,
    value_of,
)
from tests.fixtures.runs import TERMINAL, daemon_store, wait_for, window_event_ids

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SECOND = "second"
DAY = "2024-01-05"
DEAD_LETTERS = "replay.dlq.orders"  # the source's dead-letter topic (daemon.usecases.dead_letters)


@pytest.fixture(scope="module")
def second_live(second_kafka_bootstrap: str) -> str:
    """The source's live topic, on the second cluster only (3 partitions of timestamped records)."""
    topic = unique_topic("orders-live-second")
    create_topic(second_kafka_bootstrap, topic, partitions=3, config=KEEP_FOREVER)
    produce(second_kafka_bootstrap, topic, PER_PARTITION)
    return topic


@pytest.fixture(scope="module")
def two_cluster_daemon(
    tmp_path_factory: pytest.TempPathFactory,
    sample_table: Path,
    kafka_bootstrap: str,
    second_kafka_bootstrap: str,
    second_live: str,
) -> Iterator[DaemonProcess]:
    daemon = running_daemon(
        tmp_path_factory.mktemp("two-clusters"),
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        extra={"REPLAY_KAFKA_CLUSTERS": json.dumps({SECOND: {"bootstrap": second_kafka_bootstrap}})},
        source_extra={"cluster": SECOND, "live_topic": second_live},
    )
    yield daemon
    daemon.stop()


def test_a_replay_of_a_source_on_the_second_cluster_lands_and_is_followed_there_only(
    two_cluster_daemon: DaemonProcess, sample_table: Path, kafka_bootstrap: str, second_kafka_bootstrap: str
) -> None:
    before_default = topic_names(kafka_bootstrap)
    with two_cluster_daemon.client() as client:
        # slow enough for the watcher to sample its progress more than once on the way
        created = client.create_replay(OWNER, ReplayBody(source="orders", window="2024-01-05", tps=400))
        # the counts the watcher stored while it went: beacons it could only have read on the second
        # cluster (a concluded run keeps its own per-second series, not the watcher's samples)
        counted_while_going = []
        deadline = time.monotonic() + 300
        while (run := client.get_replay(OWNER, created.id)).state not in TERMINAL:
            assert time.monotonic() < deadline, run
            counted_while_going.append(run.confirmed or 0)
            time.sleep(0.5)

    expected = window_event_ids(sample_table, "2024-01-05", "2024-01-05")
    assert run.state == "succeeded", run.failure_reason
    # counted from the beacons on the second cluster, checked by a reconcile that read it there
    assert run.confirmed == len(expected)
    assert run.reconcile is not None and run.reconcile.verdict().clean, run.reconcile
    landed = consume_all(second_kafka_bootstrap, run.topic, expected=len(expected))
    assert {json.loads(value_of(m))["event_id"] for m in landed} == expected
    assert any(count > 0 for count in counted_while_going), counted_while_going
    on_second = topic_names(second_kafka_bootstrap)
    assert {run.topic, "replay.progress", "replay.control"} <= on_second
    assert topic_names(kafka_bootstrap) - before_default == set()  # nothing new on the default cluster


def test_a_plan_into_the_live_topic_reads_it_on_the_sources_cluster(
    two_cluster_daemon: DaemonProcess, second_live: str
) -> None:
    with two_cluster_daemon.client() as client:
        plan = client.plan(OWNER, ReplayBody(source="orders", window="2024-01-05", tps=2000, topic="live"))
    assert (plan.topic, plan.partitions) == (second_live, 3)


def test_lag_and_rewind_find_the_live_topics_cluster_from_its_source_or_are_told(
    two_cluster_daemon: DaemonProcess, kafka_bootstrap: str, second_kafka_bootstrap: str, second_live: str
) -> None:
    group = behind_group(second_kafka_bootstrap, second_live)
    before = committed(second_kafka_bootstrap, group, second_live)
    with two_cluster_daemon.client() as client:
        found = client.group_lag(OWNER, group, topic=second_live, sample_s=0)
        told = client.group_lag(OWNER, group, cluster=SECOND, sample_s=0)
        shown = client.rewind(OWNER, group, RewindBody(topic=second_live, to="earliest"))
        with pytest.raises(NotFound):  # on the default cluster this group has nothing
            client.group_lag(OWNER, group, cluster="default", sample_s=0)
        with pytest.raises(BadRequest) as unknown:
            client.group_lag(OWNER, group, topic=second_live, cluster="staging", sample_s=0)
        with pytest.raises(BadRequest, match="unknown Kafka cluster 'staging'"):
            client.rewind(OWNER, group, RewindBody(topic=second_live, to="earliest", cluster="staging"))
    store = daemon_store(two_cluster_daemon)
    try:  # a rewind refused for its cluster is audited like any other refusal, naming what was asked
        [refused] = [entry for entry in store.audit.list(50, target=group) if entry.outcome == "refused"]
    finally:
        store.close()
    assert (refused.action, refused.actor, refused.detail["cluster"]) == ("rewind-preview", OWNER, "staging")

    assert (found.cluster, found.total_lag) == (SECOND, sum(PER_PARTITION - c for c in before.values()))
    assert (told.cluster, told.total_lag) == (SECOND, found.total_lag)
    assert shown.cluster == SECOND and not shown.applied
    assert shown.re_consumed == sum(before.values())
    assert committed(second_kafka_bootstrap, group, second_live) == before  # a preview moves nothing
    assert "unknown Kafka cluster 'staging' (this service's clusters: default, second)" in str(unknown.value)
    assert second_live not in topic_names(kafka_bootstrap)


def test_dead_letters_of_a_source_on_the_second_cluster_are_set_aside_there(
    sample_table: Path, kafka_bootstrap: str, second_kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The broker of the second cluster refuses three records; their dead letters go to the dead-letter
    topic on that cluster, and none of them to the default one."""
    big = with_big_rows(sample_table, tmp_path / "orders", DAY)
    live = unique_topic("orders-live-dlq")
    create_topic(second_kafka_bootstrap, live, partitions=3, config=KEEP_FOREVER)
    limit_message_bytes(second_kafka_bootstrap, live, 10_000)
    daemon = running_daemon(
        tmp_path / "daemon",
        sample_table=tmp_path / "orders",
        bootstrap=kafka_bootstrap,
        extra={"REPLAY_KAFKA_CLUSTERS": json.dumps({SECOND: {"bootstrap": second_kafka_bootstrap}})},
        source_extra={"cluster": SECOND, "live_topic": live, "on_error": "dlq"},
    )
    try:
        with daemon.client() as client:
            body = ReplayBody(source="orders", window=DAY, tps=2000, topic="live", confirm_live=True)
            run = wait_for(client, client.create_replay(OWNER, body).id, TERMINAL, timeout_s=300)
            link = client.page_link(OWNER, run.id)
        with httpx.Client(follow_redirects=True) as browser:
            page = browser.get(link.url).text  # its page reads the letters back, on the second cluster
    finally:
        daemon.stop()

    assert run.state == "succeeded" and run.dead_lettered == len(big), run
    assert run.cluster == SECOND
    letters = consume_all(second_kafka_bootstrap, DEAD_LETTERS, expected=len(big))
    assert {headers_of(m)["replay-event-id"].decode() for m in letters} == big
    # the default broker is shared with other tests, which may have made its dead-letter topic: none of
    # this run's letters are there
    on_default = (
        consume_all(kafka_bootstrap, DEAD_LETTERS) if DEAD_LETTERS in topic_names(kafka_bootstrap) else []
    )
    assert [m for m in on_default if headers_of(m).get("replay-run-id") == run.id.encode()] == []
    listed = re.findall(r"<tr><td><code>([^<]+)</code></td><td>([^<]*)</td>", page.split('id="letters"')[1])
    assert {event_id for event_id, _ in listed} == big
    assert all("MSG_SIZE_TOO_LARGE" in why for _, why in listed), listed
