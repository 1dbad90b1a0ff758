"""One-off replay topics expire: the requester is told in the run's thread, then the topic is deleted.

A real daemon (SQLite, the session's broker) posts to the Slack stand-in, with a TTL of seconds: a
`topic=auto` replay's topic gets its notice while it still exists, is deleted once its TTL ran out,
and the deletion is said in the same thread. The source's live topic, replayed into as well, is never
touched. A restart sends nothing twice: what was told and deleted is recorded in the store. A
source's dead-letter topic goes once the source has had no run for the TTL.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from daemon.contract.client import DaemonClient
from daemon.contract.models import ReplayBody, RunOut
from scripts.devtools.slack_standin import SlackStandin
from scripts.devtools.thread_text import Posted
from store import Store
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon
from tests.fixtures.kafka import create_topic
from tests.fixtures.runs import TERMINAL, wait_for
from tests.fixtures.slack import BOT_TOKEN, CHANNEL

pytestmark = [pytest.mark.kafka]

TTL_S, NOTICE_S = 8.0, 4.0
WINDOW = "2024-01-02..2024-01-02"


@pytest.fixture(scope="module")
def ttl_daemon(
    tmp_path_factory: pytest.TempPathFactory, sample_table: Path, kafka_bootstrap: str, slack: SlackStandin
) -> Iterator[DaemonProcess]:
    daemon = running_daemon(
        tmp_path_factory.mktemp("topic-ttl"),
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        extra={
            "REPLAY_SLACK_BOT_TOKEN": BOT_TOKEN,
            "REPLAY_SLACK_API_URL": slack.base_url,
            "REPLAY_REPLAY_TOPIC_TTL_HOURS": str(TTL_S / 3600),
            "REPLAY_REPLAY_TOPIC_NOTICE_HOURS": str(NOTICE_S / 3600),
            "REPLAY_REPLAY_TOPIC_CHECK_S": "0.5",
        },
    )
    try:
        yield daemon
    finally:
        daemon.stop()


def _ended(client: DaemonClient, body: ReplayBody) -> RunOut:
    """A replay asked from the channel and cancelled at once: ended, its topic made."""
    run = client.create_replay(OWNER, body.model_copy(update={"slack_channel": CHANNEL}))
    client.cancel_replay(OWNER, run.id)
    return wait_for(client, run.id, TERMINAL)


def _said(slack: SlackStandin, topic: str, words: str) -> list[Posted]:
    return [m for m in slack.messages(CHANNEL) if topic in m.text and words in m.text]


def _live_topic(client: DaemonClient) -> str:
    live = next(s.live_topic for s in client.sources(OWNER) if s.name == "orders")
    assert live is not None
    return live


def test_a_one_off_topic_is_announced_then_deleted_and_a_live_topic_is_never_touched(
    ttl_daemon: DaemonProcess, slack: SlackStandin, kafka_bootstrap: str
) -> None:
    def existing() -> set[str]:
        return set(AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics)

    client = ttl_daemon.client()
    live = _live_topic(client)
    one_off = _ended(client, ReplayBody(source="orders", window=WINDOW, tps=50))
    into_live = _ended(
        client, ReplayBody(source="orders", window=WINDOW, tps=50, topic="live", confirm_live=True)
    )
    assert one_off.topic.startswith("replay.orders.") and one_off.topic in existing()
    assert into_live.topic == live

    [notice] = slack.wait_until(
        lambda: _said(slack, one_off.topic, "will be deleted at"), timeout_s=60, what="the notice"
    )
    still_there = one_off.topic in existing()
    [gone] = slack.wait_until(
        lambda: _said(slack, one_off.topic, "was deleted"), timeout_s=60, what="the deletion"
    )

    assert still_there, "the notice comes before the deletion"
    # The controller has deleted it when the daemon says so; a broker's metadata follows within moments.
    deadline = time.monotonic() + 15
    while one_off.topic in existing() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert one_off.topic not in existing()
    assert f"<@{OWNER}>" in notice.text and f"<@{OWNER}>" in gone.text
    thread = client.get_replay(OWNER, one_off.id).slack_ts
    assert (notice.thread_ts, gone.thread_ts) == (thread, thread)
    assert live in existing()
    assert not [m for m in slack.messages(CHANNEL) if live in m.text and "delete" in m.text]
    with Store(f"sqlite:///{ttl_daemon.state_dir / 'replay.db'}") as store:
        assert store.runs.get(one_off.id).topic_deleted_at is not None
        assert store.runs.get(into_live.id).topic_deleted_at is None

    ttl_daemon.restart()  # nothing is said or deleted twice: it is all recorded
    time.sleep(3)
    assert len(_said(slack, one_off.topic, "will be deleted at")) == 1
    assert len(_said(slack, one_off.topic, "was deleted")) == 1
    assert live in existing()


def test_a_one_off_topic_nothing_records_is_found_and_deleted_and_no_other_topic_is(
    ttl_daemon: DaemonProcess, kafka_bootstrap: str
) -> None:
    """A crash between creating a run's topic and recording the run leaves a topic no row names."""
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    stray = f"replay.orders.r-{secrets.token_hex(6)}"
    foreign = f"replay.orders.someone-elses-{secrets.token_hex(3)}"  # not a name the platform makes
    for topic in (stray, foreign):
        create_topic(kafka_bootstrap, topic)
    client = ttl_daemon.client()
    live = _live_topic(client)

    deadline = time.monotonic() + 60
    while stray in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.5)

    names = set(admin.list_topics(timeout=10).topics)
    assert stray not in names, "the stray one-off topic is still there"
    assert {foreign, live} <= names
    admin.delete_topics([foreign])


def test_a_dead_letter_topic_is_deleted_once_its_source_had_no_run_for_the_ttl(
    ttl_daemon: DaemonProcess, kafka_bootstrap: str
) -> None:
    """``replay.dlq.<source>`` is shared by the source's runs: kept while one ran within the ttl."""
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    client = ttl_daemon.client()
    ended = _ended(client, ReplayBody(source="orders", window=WINDOW, tps=50))
    busy, quiet = "replay.dlq.orders", f"replay.dlq.nothing-ran-{secrets.token_hex(3)}"
    for topic in (busy, quiet):
        create_topic(kafka_bootstrap, topic)

    deadline = time.monotonic() + 30
    while quiet in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    names = set(admin.list_topics(timeout=10).topics)
    assert quiet not in names, "the dead-letter topic of a source without runs is still there"
    with Store(f"sqlite:///{ttl_daemon.state_dir / 'replay.db'}") as store:
        ended_at = store.runs.get(ended.id).ended_at
        assert ended_at is not None and store.now() - ended_at < timedelta(seconds=TTL_S), "too slow to tell"
    assert busy in names, "a run of orders ended within the ttl: its dead-letter topic is kept"

    deadline = time.monotonic() + TTL_S + 30
    while busy in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.5)
    assert busy not in admin.list_topics(timeout=10).topics, "kept after its source was quiet for the ttl"
