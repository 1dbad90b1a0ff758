"""Idle pipeline clean-up with a controllable clock, the local Slack stand-in, a real broker and store."""

from __future__ import annotations

from datetime import timedelta

import pytest

from daemon.adapters.kafka_topic_admin import KafkaTopicAdmin
from daemon.core.errors import Forbidden
from tests.fixtures.daemon import ADMIN, OWNER
from tests.fixtures.janitor import (
    CO_OWNER,
    PLATFORM_CHANNEL,
    T0,
    World,
    new_pipeline,
    topic_exists,
)
from tests.fixtures.janitor import dms as _dms

pytestmark = [pytest.mark.kafka]


def test_one_prompt_per_owner_per_idle_period_across_runs_and_restarts(world: World) -> None:
    pipeline = new_pipeline(world)
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
    pipeline = new_pipeline(world)
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
    pipeline = new_pipeline(world)
    world.clock.advance(days=31)
    world.janitor.run_once()  # its idle period: the owners are asked

    with pytest.raises(Forbidden, match="only the owners"):
        world.janitor.delete_now("U0STRANGER", pipeline.id, confirm=True)
    assert topic_exists(world, pipeline.topic)

    world.janitor.delete_now(OWNER, pipeline.id, confirm=True)

    assert world.store.pipelines.get(pipeline.id).state == "archived"
    assert not topic_exists(world, pipeline.topic)
    assert sorted(_dms(world, pipeline, "removed")) == ["D0COOWNER", "D0OWNER1"]


def test_the_janitor_answers_to_the_owners_the_catalog_names_today(world: World) -> None:
    pipeline = new_pipeline(world)  # recorded with OWNER and CO_OWNER
    world.set_owners(OWNER, "U0NEWOWNER")  # CO_OWNER left the team; a new owner joined
    world.clock.advance(days=31)
    world.janitor.run_once()

    assert sorted(_dms(world, pipeline, "idle")) == ["D0NEWOWNER", "D0OWNER1"]
    with pytest.raises(Forbidden, match="only the owners"):
        world.janitor.keep(CO_OWNER, pipeline.id)
    world.janitor.keep("U0NEWOWNER", pipeline.id)
    with pytest.raises(Forbidden, match="only the owners"):
        world.janitor.delete_now(CO_OWNER, pipeline.id, confirm=True)
    assert world.store.pipelines.get(pipeline.id).snoozed_by == "U0NEWOWNER"


def test_the_live_topic_is_never_deleted(world: World) -> None:
    pipeline = new_pipeline(world, live=True)
    world.clock.advance(days=31)
    world.janitor.run_once()

    world.janitor.delete_now(ADMIN, pipeline.id, confirm=True)

    assert world.store.pipelines.get(pipeline.id).state == "archived"
    assert topic_exists(world, world.live_topic)


def test_no_answer_past_the_grace_period_deprovisions_and_keeps_history(world: World) -> None:
    pipeline = new_pipeline(world)
    run = world.store.runs.create(
        kind="pipeline",
        pipeline_id=pipeline.id,
        source="orders",
        topic=pipeline.topic,
        tps=100,
        requester=OWNER,
        watermark_column="updated_at",
    )
    world.store.runs.transition(run.id, "skipped")
    world.clock.advance(days=31)
    world.janitor.run_once()
    world.clock.advance(days=6)
    world.janitor.run_once()
    assert topic_exists(world, pipeline.topic)

    world.clock.advance(days=1, minutes=1)
    world.janitor.run_once()

    assert world.store.pipelines.get(pipeline.id).state == "archived"
    assert not topic_exists(world, pipeline.topic)
    assert [r.id for r in world.store.runs.list(pipeline_id=pipeline.id)[0]] == [run.id]
    assert sorted(_dms(world, pipeline, "removed")) == ["D0COOWNER", "D0OWNER1"]


def test_an_undeliverable_dm_goes_to_the_platform_channel(world: World) -> None:
    pipeline = new_pipeline(world)
    world.clock.advance(days=31)
    world.standin.fail_next("conversations.open", error="user_not_found")

    world.janitor.run_once()

    assert sorted(_dms(world, pipeline, "idle")) == sorted([PLATFORM_CHANNEL, "D0COOWNER"])
    period = (T0 + timedelta(days=30)).isoformat()
    sent = world.store.notifications.get(f"idle:{pipeline.id}:{period}:{OWNER}")
    assert sent is not None and sent.channel == PLATFORM_CHANNEL


def test_a_crash_between_topic_deletion_and_archiving_is_finished_by_the_next_run(world: World) -> None:
    pipeline = new_pipeline(world)
    world.clock.advance(days=31)
    world.janitor.run_once()
    world.clock.advance(days=8)
    # The crashed run got this far: the topic was deleted and the first owner was told.
    KafkaTopicAdmin(config={"bootstrap.servers": world.bootstrap}).delete(pipeline.topic)
    told = f"deprovisioned:{pipeline.id}:{OWNER}"
    world.store.notifications.record_once(told, kind="deprovisioned")
    world.store.notifications.mark_delivered(told, "D0OWNER1")

    world.restart()
    world.janitor.run_once()

    assert world.store.pipelines.get(pipeline.id).state == "archived"
    assert _dms(world, pipeline, "removed") == ["D0COOWNER"]
