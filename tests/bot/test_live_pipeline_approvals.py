"""A live pipeline of a `live_approvals: 2` source: a second owner approves its creation and each resume.

Through signed Slack requests to the bot and the real daemon: the requester's confirmation posts an
approval request in the channel; only another owner's click creates (or resumes) the pipeline, in the
requester's name with that owner as `approved_by`. The daemon holds the same rule for any caller, and
allows one pipeline of a source in its live topic at a time, racing creates included.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.contract.client import DaemonClient
from daemon.contract.models import ScheduleBody
from daemon.core.errors import Conflict
from daemon.core.grammar import ScheduleCommand, parse
from daemon.slack.pipeline_messages import PIPELINE_LIVE_APPROVE_ACTION, SCHEDULE_LIVE_CONFIRM_ACTION
from scripts.devtools.slack_standin import SlackStandin
from scripts.devtools.thread_text import Posted
from store import Store
from tests.fixtures.daemon import OWNER, STRANGER, DaemonProcess
from tests.fixtures.slack import CHANNEL, SECOND_OWNER, BotUnderTest, buttons_of, two_owner_daemon

pytestmark = [pytest.mark.kafka]

YEARLY = 'cron="0 0 1 1 *"'  # no run fires during a test
LIVE_SCHEDULE = f"schedule orders {YEARLY} watermark=updated_at topic=live"


@pytest.fixture(scope="module")
def slack_daemon(
    tmp_path_factory: pytest.TempPathFactory, sample_table: Path, kafka_bootstrap: str, slack: SlackStandin
) -> Iterator[DaemonProcess]:
    """The real daemon with `orders` owned by two people who must both agree to publish into live."""
    daemon = two_owner_daemon(
        tmp_path_factory.mktemp("replayd-pipeline-approvals"),
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        slack=slack,
    )
    try:
        yield daemon
    finally:
        daemon.stop()


def _approval_requests(slack: SlackStandin) -> list[Posted]:
    return [m for m in slack.messages(CHANNEL) if PIPELINE_LIVE_APPROVE_ACTION in buttons_of(m.blocks)]


def _live_pipelines(client: DaemonClient) -> list[str]:
    return [p.id for p in client.list_pipelines(OWNER) if p.topic_mode == "live" and p.state != "archived"]


def _approvals(daemon: DaemonProcess, target: str) -> list[tuple[str, str]]:
    with Store(f"sqlite:///{daemon.state_dir / 'replay.db'}") as store:
        return [(e.actor, e.outcome) for e in store.audit.list(500, target=target) if e.action == "approve"]


def _click(bot: BotUnderTest, action: str, value: str, user: str) -> dict[str, Any]:
    [answer] = bot.replies(bot.click(action, value, user=user)[1], timeout_s=60)
    return answer


def _unschedule_all(client: DaemonClient) -> None:
    for pipeline_id in _live_pipelines(client):
        client.unschedule(OWNER, pipeline_id, confirm=True)


def _approved_body() -> ScheduleBody:
    command = parse(LIVE_SCHEDULE)
    assert isinstance(command, ScheduleCommand)
    return ScheduleBody.of(command, confirm_live=True, approved_by=SECOND_OWNER)


def test_a_live_pipeline_is_created_and_resumed_only_after_a_second_owners_click(
    bot: BotUnderTest, slack: SlackStandin, daemon_client: DaemonClient, slack_daemon: DaemonProcess
) -> None:
    _unschedule_all(daemon_client)
    [question] = bot.replies(bot.slash(LIVE_SCHEDULE, user=OWNER).key, timeout_s=60)
    asked = _click(
        bot, SCHEDULE_LIVE_CONFIRM_ACTION, buttons_of(question["blocks"])[SCHEDULE_LIVE_CONFIRM_ACTION], OWNER
    )
    [prompt] = slack.wait_until(lambda: _approval_requests(slack), timeout_s=30, what="the approval request")
    approve = buttons_of(prompt.blocks)[PIPELINE_LIVE_APPROVE_ACTION]

    own = _click(bot, PIPELINE_LIVE_APPROVE_ACTION, approve, OWNER)
    stranger = _click(bot, PIPELINE_LIVE_APPROVE_ACTION, approve, STRANGER)
    assert _live_pipelines(daemon_client) == []  # nothing exists before another owner's click
    approved = _click(bot, PIPELINE_LIVE_APPROVE_ACTION, approve, SECOND_OWNER)

    assert "Asked in the channel" in asked["text"]
    assert f"<@{OWNER}> asks to schedule" in prompt.text and prompt.thread_ts is None
    assert "another owner of the source must approve" in own["text"]
    assert "only another owner of 'orders'" in stranger["text"]
    assert approved["response_type"] == "in_channel" and f"Approved by <@{SECOND_OWNER}>" in approved["text"]
    [created] = _live_pipelines(daemon_client)
    assert re.search(rf"Scheduled as `{created}`", approved["text"]), approved["text"]
    assert (SECOND_OWNER, "accepted") in _approvals(slack_daemon, created)
    assert (STRANGER, "refused") in _approvals(slack_daemon, "orders")

    daemon_client.pipeline_action(OWNER, created, "pause")
    before = len(_approval_requests(slack))
    [resume_asked] = bot.replies(bot.slash(f"resume {created}", user=OWNER).key, timeout_s=60)
    prompts = slack.wait_until(
        lambda: _approval_requests(slack)[before:], timeout_s=30, what="the resume approval request"
    )
    assert "Asked in the channel" in resume_asked["text"]
    assert daemon_client.get_pipeline(OWNER, created).state == "paused"  # not before the click
    resumed = _click(
        bot,
        PIPELINE_LIVE_APPROVE_ACTION,
        buttons_of(prompts[0].blocks)[PIPELINE_LIVE_APPROVE_ACTION],
        SECOND_OWNER,
    )

    assert f"Approved by <@{SECOND_OWNER}>" in resumed["text"], resumed["text"]
    assert daemon_client.get_pipeline(OWNER, created).state == "active"
    assert _approvals(slack_daemon, created).count((SECOND_OWNER, "accepted")) == 2
    _unschedule_all(daemon_client)


def test_the_daemon_refuses_a_live_pipeline_or_its_resume_without_a_second_owner(
    daemon_client: DaemonClient,
) -> None:
    _unschedule_all(daemon_client)
    unapproved = _approved_body().model_copy(update={"approved_by": None})
    with pytest.raises(Conflict, match="needs the approval of a second owner"):
        daemon_client.schedule_once(OWNER, unapproved, idempotency_key="unapproved-live")
    assert _live_pipelines(daemon_client) == []

    pipeline, _ = daemon_client.schedule_once(OWNER, _approved_body(), idempotency_key="approved-live")
    daemon_client.pipeline_action(OWNER, pipeline.id, "pause")
    with pytest.raises(Conflict, match="needs the approval of a second owner"):
        daemon_client.pipeline_action(OWNER, pipeline.id, "resume")
    assert daemon_client.get_pipeline(OWNER, pipeline.id).state == "paused"
    _unschedule_all(daemon_client)


def test_one_pipeline_of_a_source_in_its_live_topic_even_when_creates_race(
    daemon_client: DaemonClient,
) -> None:
    _unschedule_all(daemon_client)
    outcomes: list[str] = []

    def create(key: str) -> None:
        try:
            pipeline, _ = daemon_client.schedule_once(OWNER, _approved_body(), idempotency_key=key)
            outcomes.append(f"created {pipeline.id}")
        except Conflict as exc:
            outcomes.append(str(exc))

    racers = [threading.Thread(target=create, args=(f"race-{i}",)) for i in range(4)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()

    [winner] = _live_pipelines(daemon_client)
    assert outcomes.count(f"created {winner}") == 1, outcomes
    refused = [o for o in outcomes if not o.startswith("created")]
    assert len(refused) == 3 and all(
        f"pipeline {winner}" in o and "unschedule it first" in o for o in refused
    )
    _unschedule_all(daemon_client)
