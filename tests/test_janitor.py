"""Idle pipeline clean-up with a controllable clock, the local Slack stand-in, a real broker and store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from daemon.adapters.kafka_admin import KafkaAdmin
from daemon.adapters.slack_notifier import SlackNotifier
from daemon.core.errors import Forbidden
from daemon.slack.web_client import make_web_client
from daemon.usecases.catalog import load_catalog
from daemon.usecases.janitor import IdlePolicy, Janitor
from scripts.devtools.slack_standin import SlackStandin
from store import Store
from store.migrate import upgrade
from store.models import Pipeline
from tests.fixtures.daemon import ADMIN, OWNER, write_catalog
from tests.fixtures.kafka import create_topic, unique_topic

pytestmark = [pytest.mark.kafka]

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
CO_OWNER = "U0COOWNER"
PLATFORM_CHANNEL = "C0PLATFORM"
POLICY = IdlePolicy(idle_after_days=30, grace_days=7, keep_days=14)


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@dataclass
class World:
    clock: Clock
    store: Store
    janitor: Janitor
    standin: SlackStandin
    bootstrap: str
    live_topic: str
    build: Callable[[], Janitor]

    def restart(self) -> None:
        """A new janitor (as after a daemon restart) on the same store, clock and Slack."""
        self.janitor = self.build()


@pytest.fixture
def world(
    database_url: str, kafka_bootstrap: str, slack_standin: SlackStandin, tmp_path: Path, sample_table: Path
) -> Iterator[World]:
    clock = Clock()
    upgrade(database_url)
    store = Store(database_url, clock=clock)
    live_topic = unique_topic("orders-live")
    create_topic(kafka_bootstrap, live_topic)
    catalog = load_catalog(write_catalog(tmp_path / "sources.yaml", sample_table, live_topic=live_topic))

    def build() -> Janitor:
        notifier = SlackNotifier(
            client=make_web_client("xoxb-janitor", slack_standin.base_url), default_channel=PLATFORM_CHANNEL
        )
        return Janitor(
            store=store,
            catalog=catalog,
            topics=KafkaAdmin(config={"bootstrap.servers": kafka_bootstrap}),
            notifier=notifier,
            clock=clock,
            policy=POLICY,
            admins=[ADMIN],
        )

    yield World(clock, store, build(), slack_standin, kafka_bootstrap, live_topic, build)
    store.close()


def _pipeline(world: World, *, live: bool = False) -> Pipeline:
    topic = world.live_topic if live else unique_topic("replay.orders.p")
    if not live:
        create_topic(world.bootstrap, topic)
    return world.store.pipelines.create(
        source="orders",
        schedule="every=1d",
        watermark_column="updated_at",
        topic=topic,
        topic_created=not live,
        tps=100,
        created_by=OWNER,
        owners=[OWNER, CO_OWNER],
    )


def _dms(world: World, pipeline: Pipeline, kind: str) -> list[str]:
    """Channels that got a message of `kind` ('idle' or 'removed') about `pipeline`."""
    found = []
    for message in world.standin.messages():
        text = message.text or ""
        if pipeline.id in text and kind in text.lower():
            found.append(message.channel)
    return found


def _topic_exists(world: World, topic: str) -> bool:
    return topic in AdminClient({"bootstrap.servers": world.bootstrap}).list_topics(timeout=10).topics


def test_one_prompt_per_owner_per_idle_period_across_runs_and_restarts(world: World) -> None:
    pipeline = _pipeline(world)
    world.clock.advance(days=29)
    world.janitor.run_once()
    assert _dms(world, pipeline, "idle") == []

    world.clock.advance(days=2)
    for _ in range(3):
        world.janitor.run_once()
    world.restart()
    world.janitor.run_once()

    assert sorted(_dms(world, pipeline, "idle")) == ["D0COOWNER", "D0OWNER1"]
    assert world.store.pipelines.get(pipeline.id).delete_after == T0 + timedelta(days=31 + 7)


def test_keep_prevents_deletion_until_the_snooze_ends_then_asks_again(world: World) -> None:
    pipeline = _pipeline(world)
    world.clock.advance(days=31)
    world.janitor.run_once()
    world.janitor.keep(CO_OWNER, pipeline.id)

    world.clock.advance(days=13)  # past the original grace period, inside the 14-day snooze
    world.janitor.run_once()
    kept = world.store.pipelines.get(pipeline.id)
    assert (kept.state, kept.snoozed_by) == ("active", CO_OWNER)
    assert len(_dms(world, pipeline, "idle")) == 2

    world.clock.advance(days=2)  # the snooze is over
    world.janitor.run_once()
    assert len(_dms(world, pipeline, "idle")) == 4
    assert world.store.pipelines.get(pipeline.id).state == "active"
    assert [e.actor for e in world.store.audit.list(target=pipeline.id) if e.action == "keep"] == [CO_OWNER]


def test_delete_now_is_refused_to_strangers_and_done_for_owners(world: World) -> None:
    pipeline = _pipeline(world)

    with pytest.raises(Forbidden, match="only the owners"):
        world.janitor.delete_now("U0STRANGER", pipeline.id)
    assert _topic_exists(world, pipeline.topic)

    world.janitor.delete_now(OWNER, pipeline.id)

    assert world.store.pipelines.get(pipeline.id).state == "archived"
    assert not _topic_exists(world, pipeline.topic)
    assert sorted(_dms(world, pipeline, "removed")) == ["D0COOWNER", "D0OWNER1"]


def test_the_live_topic_is_never_deleted(world: World) -> None:
    pipeline = _pipeline(world, live=True)

    world.janitor.delete_now(ADMIN, pipeline.id)

    assert world.store.pipelines.get(pipeline.id).state == "archived"
    assert _topic_exists(world, world.live_topic)


def test_no_answer_past_the_grace_period_deprovisions_and_keeps_history(world: World) -> None:
    pipeline = _pipeline(world)
    run = world.store.runs.create(
        kind="pipeline",
        pipeline_id=pipeline.id,
        source="orders",
        target_topic=pipeline.topic,
        tps=100,
        requester=OWNER,
        watermark_column="updated_at",
    )
    world.store.runs.transition(run.id, "skipped")
    world.clock.advance(days=31)
    world.janitor.run_once()
    world.clock.advance(days=6)
    world.janitor.run_once()
    assert _topic_exists(world, pipeline.topic)

    world.clock.advance(days=1, minutes=1)
    world.janitor.run_once()

    assert world.store.pipelines.get(pipeline.id).state == "archived"
    assert not _topic_exists(world, pipeline.topic)
    assert [r.id for r in world.store.runs.list(pipeline_id=pipeline.id)[0]] == [run.id]
    assert sorted(_dms(world, pipeline, "removed")) == ["D0COOWNER", "D0OWNER1"]


def test_an_undeliverable_dm_goes_to_the_platform_channel(world: World) -> None:
    pipeline = _pipeline(world)
    world.clock.advance(days=31)
    world.standin.fail_next("conversations.open", error="user_not_found")

    world.janitor.run_once()

    assert sorted(_dms(world, pipeline, "idle")) == sorted([PLATFORM_CHANNEL, "D0COOWNER"])
    period = (T0 + timedelta(days=30)).isoformat()
    sent = world.store.notifications.get(f"idle:{pipeline.id}:{period}:{OWNER}")
    assert sent is not None and sent.channel == PLATFORM_CHANNEL


def test_a_crash_between_topic_deletion_and_archiving_is_finished_by_the_next_run(world: World) -> None:
    pipeline = _pipeline(world)
    world.clock.advance(days=31)
    world.janitor.run_once()
    world.clock.advance(days=8)
    # The crashed run got this far: the topic was deleted and the first owner was told.
    KafkaAdmin(config={"bootstrap.servers": world.bootstrap}).delete(pipeline.topic)
    world.store.notifications.record_once(f"deprovisioned:{pipeline.id}:{OWNER}", kind="deprovisioned")

    world.restart()
    world.janitor.run_once()

    assert world.store.pipelines.get(pipeline.id).state == "archived"
    assert _dms(world, pipeline, "removed") == ["D0COOWNER"]
