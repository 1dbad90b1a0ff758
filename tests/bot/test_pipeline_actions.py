"""Pipelines from Slack: signed slash commands and button clicks through the bot's real HTTP endpoint,
the real Replay Service (SQLite, the real broker; no Spark job: nothing here is due to run) posting to
the local Slack stand-in. The daemon is the judge of who may do what; these tests check the bot asks
it, shows its answer, and asks first where a click must confirm."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from daemon.adapters.slack_notifier import SlackNotifier
from daemon.contract.client import DaemonClient
from daemon.contract.models import IdlePrompt
from daemon.core.errors import Conflict
from daemon.slack.blocks import when
from daemon.slack.idle_messages import IDLE_DELETE_ACTION, IDLE_KEEP_ACTION
from daemon.slack.pipeline_messages import (
    SCHEDULE_LIVE_CONFIRM_ACTION,
    UNSCHEDULE_CONFIRM_ACTION,
    UNSCHEDULE_KEEP_ACTION,
)
from daemon.slack.web_client import make_web_client
from daemon.usecases.wire import pipeline_out
from scripts.devtools.slack_standin import SlackStandin
from store import Store
from store.models import Pipeline
from tests.fixtures.daemon import NO_JOBS, OWNER, STRANGER, DaemonProcess
from tests.fixtures.slack import BOT_TOKEN, CHANNEL, STANDIN_TOKEN, BotUnderTest

pytestmark = [pytest.mark.kafka, NO_JOBS]

YEARLY = 'cron="0 0 1 1 *"'  # next fire is months away at most: no run starts during a test
KEEP_DAYS = 14


@pytest.fixture(scope="module")
def daemon_store(slack_daemon: DaemonProcess) -> Iterator[Store]:
    """The daemon's own SQLite store, to read a pipeline as the janitor sees it and to age one."""
    store = Store(f"sqlite:///{slack_daemon.state_dir / 'replay.db'}")
    try:
        yield store
    finally:
        store.close()


def _pipeline_ids(client: DaemonClient) -> set[str]:
    return {p.id for p in client.list_pipelines(OWNER)}


def _reply(bot: BotUnderTest, text: str, user: str = OWNER) -> dict[str, Any]:
    [reply] = bot.replies(bot.slash(text, user=user).key, timeout_s=60)
    assert reply["response_type"] == "ephemeral"
    return reply


def _buttons(message: dict[str, Any]) -> dict[str, str]:
    [actions] = [block for block in message["blocks"] if block["type"] == "actions"]
    return {button["action_id"]: button["value"] for button in actions["elements"]}


def _click(bot: BotUnderTest, action_id: str, value: str, user: str = OWNER) -> dict[str, Any]:
    _, key = bot.click(action_id, value, user=user)
    return bot.replies(key, timeout_s=60)[0]


def _schedule(bot: BotUnderTest, options: str = "") -> str:
    reply = _reply(bot, f"schedule orders {YEARLY} watermark=updated_at {options}".strip())
    found = re.search(r"Scheduled as `(p-[0-9a-f]{12})`", reply["text"])
    assert found, reply["text"]
    return found[1]


def test_schedule_answers_with_the_summary_and_next_run_and_the_channel_gets_the_pipeline_thread(
    bot: BotUnderTest, slack: SlackStandin, daemon_client: DaemonClient
) -> None:
    result = bot.slash(f"schedule orders {YEARLY} watermark=updated_at tps=50", user=OWNER)

    assert "asking the Replay Service" in result.ack["text"]
    [reply] = bot.replies(result.key, timeout_s=60)
    scheduled = re.search(r"Scheduled as `(p-[0-9a-f]{12})`", reply["text"])
    assert scheduled is not None, reply["text"]
    pipeline_id = scheduled[1]
    pipeline = daemon_client.get_pipeline(OWNER, pipeline_id)
    next_run = when(pipeline.next_run_at)
    assert reply["response_type"] == "ephemeral"
    assert f"Next run: {next_run}" in reply["text"]
    assert "in the pipeline's thread" in reply["text"]
    [summary] = [m for m in slack.messages(CHANNEL) if pipeline_id in m.text]
    assert (pipeline.slack_channel, pipeline.slack_ts) == (CHANNEL, summary.ts)
    assert "50/s" in repr(summary.blocks) and next_run in repr(summary.blocks)
    print(slack.render_thread(CHANNEL, summary.ts))


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            'schedule orders cron="61 * * * *" watermark=updated_at',
            'cron="61 * * * *" is not a valid schedule',
        ),
        ("schedule orders every=0m watermark=updated_at", "`every=0m`: must be at least 1m"),
        ("schedule orders every=1h watermark=nope", "watermark=nope is not the watermark column of 'orders'"),
        ("schedule ordres every=1h watermark=updated_at", "unknown source 'ordres'"),
    ],
)
def test_bad_schedule_input_gets_an_ephemeral_error_and_creates_nothing(
    bot: BotUnderTest, daemon_client: DaemonClient, text: str, shown: str
) -> None:
    before = _pipeline_ids(daemon_client)

    result = bot.slash(text, user=OWNER)

    answer = result.ack.get("text", "")
    if shown not in answer:  # only the daemon knows the catalog, the table and a full cron check
        answer = bot.replies(result.key, timeout_s=60)[0]["text"]
    assert shown in answer
    assert "Usage:" in answer
    assert _pipeline_ids(daemon_client) == before


def test_pipelines_and_pipeline_show_the_schedule_watermark_runs_and_next_run(bot: BotUnderTest) -> None:
    pipeline_id = _schedule(bot)

    listed = _reply(bot, "pipelines mine")["text"]
    detail = repr(_reply(bot, f"pipeline {pipeline_id}")["blocks"])

    assert f"`{pipeline_id}`" in listed
    for shown in ("`cron=0 0 1 1 *`", "`updated_at` (committed: nothing yet)", "no runs yet", "UTC"):
        assert shown in detail
    assert pipeline_id not in _reply(bot, "pipelines mine", user=STRANGER)["text"]


def test_a_stranger_cannot_pause_a_pipeline_its_owner_can_pause_and_resume(
    bot: BotUnderTest, daemon_client: DaemonClient
) -> None:
    pipeline_id = _schedule(bot)

    refused = _reply(bot, f"pause {pipeline_id}", user=STRANGER)
    assert f"only the owners of pipeline {pipeline_id}" in refused["text"]
    assert daemon_client.get_pipeline(OWNER, pipeline_id).state == "active"

    assert "no runs until" in _reply(bot, f"pause {pipeline_id}")["text"]
    assert daemon_client.get_pipeline(OWNER, pipeline_id).state == "paused"
    assert f"Resumed `{pipeline_id}`: next run" in _reply(bot, f"resume {pipeline_id}")["text"]
    assert daemon_client.get_pipeline(OWNER, pipeline_id).state == "active"


def test_unschedule_waits_for_the_requesters_click_and_a_second_click_is_harmless(
    bot: BotUnderTest, daemon_client: DaemonClient
) -> None:
    pipeline_id = _schedule(bot)

    question = _reply(bot, f"unschedule {pipeline_id}")
    buttons = _buttons(question)
    assert set(buttons) == {UNSCHEDULE_CONFIRM_ACTION, UNSCHEDULE_KEEP_ACTION}
    assert daemon_client.get_pipeline(OWNER, pipeline_id).state == "active"

    value = buttons[UNSCHEDULE_CONFIRM_ACTION]
    refused = _click(bot, UNSCHEDULE_CONFIRM_ACTION, value, user=STRANGER)
    assert f"Only <@{OWNER}> can answer" in refused["text"] and refused["replace_original"] is False
    assert daemon_client.get_pipeline(OWNER, pipeline_id).state == "active"

    done = _click(bot, UNSCHEDULE_CONFIRM_ACTION, value)
    again = _click(bot, UNSCHEDULE_CONFIRM_ACTION, value)
    assert f"Unscheduled `{pipeline_id}`" in done["text"] and done["replace_original"] is True
    assert daemon_client.get_pipeline(OWNER, pipeline_id).state == "archived"
    assert "already unscheduled; this click changed nothing" in again["text"]


def test_keep_it_leaves_the_pipeline_scheduled(bot: BotUnderTest, daemon_client: DaemonClient) -> None:
    pipeline_id = _schedule(bot)
    value = _buttons(_reply(bot, f"unschedule {pipeline_id}"))[UNSCHEDULE_KEEP_ACTION]

    kept = _click(bot, UNSCHEDULE_KEEP_ACTION, value)

    assert f"`{pipeline_id}` stays scheduled" in kept["text"]
    assert daemon_client.get_pipeline(OWNER, pipeline_id).state == "active"


def test_a_live_schedule_waits_for_the_requesters_click_and_a_double_click_creates_one_pipeline(
    bot: BotUnderTest, daemon_client: DaemonClient
) -> None:
    live_topic = next(s.live_topic for s in daemon_client.sources(OWNER) if s.name == "orders")
    before = _pipeline_ids(daemon_client)

    question = _reply(bot, f"schedule orders {YEARLY} watermark=updated_at topic=live")
    value = _buttons(question)[SCHEDULE_LIVE_CONFIRM_ACTION]
    assert f"*live* topic `{live_topic}`" in question["text"]
    assert _pipeline_ids(daemon_client) == before

    refused = _click(bot, SCHEDULE_LIVE_CONFIRM_ACTION, value, user=STRANGER)
    assert f"Only <@{OWNER}> can answer" in refused["text"]
    assert _pipeline_ids(daemon_client) == before

    outcomes: list[str] = []
    clicks = [
        threading.Thread(
            target=lambda: outcomes.append(_click(bot, SCHEDULE_LIVE_CONFIRM_ACTION, value)["text"])
        )
        for _ in range(2)
    ]
    for click in clicks:
        click.start()
    for click in clicks:
        click.join()

    [created] = _pipeline_ids(daemon_client) - before
    assert daemon_client.get_pipeline(OWNER, created).topic == live_topic
    assert sum(f"Scheduled as `{created}`" in text for text in outcomes) == 1, outcomes
    assert sum("created nothing new" in text for text in outcomes) == 1, outcomes


# --- the janitor's buttons ------------------------------------------------------------------------------


def _age(store: Store, pipeline_id: str, days: int) -> None:
    """As if the pipeline had been created `days` ago (the daemon's janitor reads the real clock)."""
    with store.session() as session:
        session.execute(
            update(Pipeline)
            .where(Pipeline.id == pipeline_id)
            .values(created_at=datetime.now(UTC) - timedelta(days=days))
        )


def _open_idle_period(store: Store, pipeline_id: str) -> None:
    """As if it had published nothing for 31 days and the janitor's pass had asked its owners."""
    _age(store, pipeline_id, days=31)
    created = store.pipelines.get(pipeline_id).created_at
    store.pipelines.update(
        pipeline_id,
        idle_since=created + timedelta(days=30),
        delete_after=datetime.now(UTC) + timedelta(days=7),
    )


def _idle_prompt(slack: SlackStandin, store: Store, pipeline_id: str) -> dict[str, str]:
    """The DM the janitor sends the owner (same notifier, same stand-in); its buttons by action id."""
    return _buttons({"blocks": _idle_prompt_message(slack, store, pipeline_id)})


def _idle_prompt_message(slack: SlackStandin, store: Store, pipeline_id: str) -> list[dict[str, Any]]:
    """The blocks of the janitor's DM to the owner."""
    notifier = SlackNotifier(client=make_web_client(BOT_TOKEN, slack.base_url))
    now = datetime.now(UTC)
    prompt = IdlePrompt(
        pipeline=pipeline_out(store.pipelines.get(pipeline_id)),
        idle_since=now,
        deadline=now + timedelta(days=7),
        keep_days=KEEP_DAYS,
    )
    channel = notifier.idle_prompt(prompt, OWNER)
    [message] = [m for m in slack.messages(channel) if pipeline_id in m.text and "idle" in m.text]
    return list(message.blocks)


def test_keep_clicked_by_an_owner_snoozes_an_idle_pipeline(
    bot: BotUnderTest, slack: SlackStandin, daemon_client: DaemonClient, daemon_store: Store
) -> None:
    pipeline_id = _schedule(bot, "idle_after=1d")
    _age(daemon_store, pipeline_id, days=2)
    assert pipeline_id in {p.id for p in daemon_client.idle_pipelines(OWNER)}
    assert "unless kept" in _reply(bot, "pipelines idle")["text"]
    buttons = _idle_prompt(slack, daemon_store, pipeline_id)

    kept = _click(bot, IDLE_KEEP_ACTION, buttons[IDLE_KEEP_ACTION])

    assert kept["replace_original"] is True
    assert f"Kept `{pipeline_id}` for {KEEP_DAYS} more days" in kept["text"]
    assert pipeline_id not in {p.id for p in daemon_client.idle_pipelines(OWNER)}
    snoozed = daemon_store.pipelines.get(pipeline_id)
    assert snoozed.snoozed_by == OWNER
    assert snoozed.snoozed_until is not None and snoozed.snoozed_until > datetime.now(UTC) + timedelta(
        days=13
    )


def test_delete_now_is_refused_to_a_stranger_and_archives_the_pipeline_for_an_owner(
    bot: BotUnderTest, slack: SlackStandin, daemon_client: DaemonClient, daemon_store: Store
) -> None:
    pipeline_id = _schedule(bot)
    _open_idle_period(daemon_store, pipeline_id)
    value = _idle_prompt(slack, daemon_store, pipeline_id)[IDLE_DELETE_ACTION]

    refused = _click(bot, IDLE_DELETE_ACTION, value, user=STRANGER)
    assert refused["response_type"] == "ephemeral" and refused["replace_original"] is False
    assert f"only the owners of pipeline {pipeline_id}" in refused["text"]
    assert daemon_client.get_pipeline(OWNER, pipeline_id).state == "active"

    deleted = _click(bot, IDLE_DELETE_ACTION, value)
    assert deleted["replace_original"] is True and f"Deleted `{pipeline_id}` now" in deleted["text"]
    assert daemon_client.get_pipeline(OWNER, pipeline_id).state == "archived"
    slack.wait_until(
        lambda: [m for m in slack.messages("D0OWNER1") if pipeline_id in m.text and "removed" in m.text],
        what="the daemon's removal DM",
    )

    again = _click(bot, IDLE_DELETE_ACTION, value)
    assert f"`{pipeline_id}` was already removed; this click changed nothing" in again["text"]


def test_delete_now_asks_for_a_confirmation_and_is_refused_for_a_pipeline_that_is_not_idle(
    bot: BotUnderTest, slack: SlackStandin, daemon_client: DaemonClient, daemon_store: Store
) -> None:
    pipeline_id = _schedule(bot)  # active: it has not been idle for a moment
    blocks = _idle_prompt_message(slack, daemon_store, pipeline_id)
    [actions] = [block for block in blocks if block["type"] == "actions"]
    [delete] = [button for button in actions["elements"] if button["action_id"] == IDLE_DELETE_ACTION]
    assert delete["confirm"]["confirm"]["text"] == "Delete now"  # Slack asks before the click is sent

    refused = _click(bot, IDLE_DELETE_ACTION, delete["value"])

    assert refused["response_type"] == "ephemeral" and refused["replace_original"] is False
    assert f"pipeline {pipeline_id} is not idle" in refused["text"]
    assert "already removed" not in refused["text"]
    with pytest.raises(Conflict, match="needs an explicit confirmation"):
        daemon_client.delete_now(OWNER, pipeline_id, confirm=False)
    _open_idle_period(daemon_store, pipeline_id)
    with pytest.raises(Conflict, match="needs an explicit confirmation"):  # idle: still not without one
        daemon_client.delete_now(OWNER, pipeline_id, confirm=False)
    assert daemon_client.get_pipeline(OWNER, pipeline_id).state == "active"


# --- a Replay Service that is down ------------------------------------------------------------------------


def test_a_daemon_that_is_down_gets_a_clear_message_and_leaves_the_prompt_in_place(
    start_bot: Callable[..., BotUnderTest],
) -> None:
    bot = start_bot("http://127.0.0.1:9", STANDIN_TOKEN)  # discard port: connection refused

    listed = bot.replies(bot.slash("pipelines").key)[0]
    _, key = bot.click(IDLE_KEEP_ACTION, "p-0123456789ab:14")
    [click] = bot.replies(key)

    assert "The Replay Service did not answer" in listed["text"]
    assert "The Replay Service did not answer" in click["text"]
    assert click["replace_original"] is False
