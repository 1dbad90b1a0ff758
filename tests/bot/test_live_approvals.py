"""`live_approvals: 2` and `force=yes` through signed Slack requests to the bot and the real daemon.

The requester's confirmation posts an approval request in the channel (not ephemeral); only another
owner's click creates the run, and the daemon audits every approval, refused or accepted. A window that
overlaps a live run is refused before any button, and `force=yes` makes the prompt name that run.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.contract.client import DaemonClient
from daemon.contract.models import ReplayBody
from daemon.core.errors import Conflict
from daemon.slack.run_messages import APPROVE_ACTION, CONFIRM_ACTION
from scripts.devtools.slack_standin import SlackStandin
from scripts.devtools.thread_text import Posted
from store import Store
from tests.fixtures.daemon import OWNER, STRANGER, DaemonProcess
from tests.fixtures.slack import CHANNEL, SECOND_OWNER, BotUnderTest, buttons_of, two_owner_daemon

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

LIVE = "orders 2024-01-05 tps=5000 topic=live"


@pytest.fixture(scope="module")
def slack_daemon(
    tmp_path_factory: pytest.TempPathFactory, sample_table: Path, kafka_bootstrap: str, slack: SlackStandin
) -> Iterator[DaemonProcess]:
    """The real daemon with `orders` owned by two people who must both agree to a live replay."""
    daemon = two_owner_daemon(
        tmp_path_factory.mktemp("replayd-approvals"),
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        slack=slack,
    )
    try:
        yield daemon
    finally:
        daemon.stop()


def _approval_requests(slack: SlackStandin) -> list[Posted]:
    return [m for m in slack.messages(CHANNEL) if APPROVE_ACTION in buttons_of(m.blocks)]


def _run_ids(client: DaemonClient) -> set[str]:
    return {run.id for run in client.list_replays(OWNER, limit=200).runs}


def _audit(daemon: DaemonProcess, action: str) -> list[tuple[str, str, str | None]]:
    with Store(f"sqlite:///{daemon.state_dir / 'replay.db'}") as store:
        return [(e.actor, e.outcome, e.target) for e in store.audit.list() if e.action == action]


def test_a_live_replay_needs_a_second_owners_click_in_the_channel(
    bot: BotUnderTest, slack: SlackStandin, daemon_client: DaemonClient, slack_daemon: DaemonProcess
) -> None:
    before = _run_ids(daemon_client)
    [question] = bot.replies(bot.slash(LIVE, user=OWNER).key, timeout_s=60)
    assert question["response_type"] == "ephemeral"
    assert "second owner" in question["text"]

    [asked] = bot.replies(
        bot.click(CONFIRM_ACTION, buttons_of(question["blocks"])[CONFIRM_ACTION], user=OWNER)[1]
    )
    [prompt] = slack.wait_until(lambda: _approval_requests(slack), timeout_s=30, what="the approval request")
    approve = buttons_of(prompt.blocks)[APPROVE_ACTION]

    [own] = bot.replies(bot.click(APPROVE_ACTION, approve, user=OWNER)[1])
    [stranger] = bot.replies(bot.click(APPROVE_ACTION, approve, user=STRANGER)[1], timeout_s=60)
    assert _run_ids(daemon_client) == before  # nothing launched before another owner's click

    [approved] = bot.replies(bot.click(APPROVE_ACTION, approve, user=SECOND_OWNER)[1], timeout_s=60)
    found = re.search(r"Accepted as `(r-[0-9a-f]{12})`", approved["text"])
    assert found, approved["text"]
    run = daemon_client.get_replay(OWNER, found[1])

    assert "Asked in the channel" in asked["text"] and asked["replace_original"] is True
    assert f"<@{OWNER}> asks to publish" in prompt.text and prompt.thread_ts is None
    assert (own["response_type"], own["replace_original"]) == ("ephemeral", False)
    assert "another owner of the source must approve" in own["text"]
    assert (stranger["response_type"], stranger["replace_original"]) == ("ephemeral", False)
    assert "only another owner of 'orders'" in stranger["text"]
    assert (approved["response_type"], approved["replace_original"]) == ("in_channel", True)
    assert f"Approved by <@{SECOND_OWNER}>" in approved["text"]
    assert _run_ids(daemon_client) - before == {run.id}
    assert (run.requester, run.topic) == (OWNER, prompt.text.split("live* topic `")[1].split("`")[0])
    approvals = _audit(slack_daemon, "approve")
    assert (STRANGER, "refused", "orders") in approvals
    assert (SECOND_OWNER, "accepted", run.id) in approvals
    with contextlib.suppress(Conflict):  # spare the machine the Spark job; it may have ended
        daemon_client.cancel_replay(OWNER, run.id)


def test_without_an_approval_the_daemon_refuses_a_live_replay(daemon_client: DaemonClient) -> None:
    body = ReplayBody(source="orders", window="2024-01-07", tps=5000, topic="live", confirm_live=True)

    with pytest.raises(Conflict, match="needs the approval of a second owner"):
        daemon_client.create_replay(OWNER, body)


def test_an_overlap_is_refused_at_once_and_force_names_the_run_it_overrides(
    bot: BotUnderTest, daemon_client: DaemonClient
) -> None:
    body = ReplayBody(
        source="orders",
        window="2024-01-06",
        tps=5000,
        topic="live",
        confirm_live=True,
        approved_by=SECOND_OWNER,
    )
    first = daemon_client.create_replay(OWNER, body)

    [refused] = bot.replies(bot.slash("orders 2024-01-06 topic=live", user=SECOND_OWNER).key, timeout_s=60)
    [forced] = bot.replies(
        bot.slash("orders 2024-01-06 topic=live force=yes", user=SECOND_OWNER).key, timeout_s=60
    )
    with contextlib.suppress(Conflict):
        daemon_client.cancel_replay(OWNER, first.id)

    assert first.id in refused["text"] and "force=yes" in refused["text"]
    assert CONFIRM_ACTION not in buttons_of(refused.get("blocks", []))
    assert f"`force=yes` overrides `{first.id}`" in forced["text"]
    assert f"<@{OWNER}>" in forced["text"]
    assert CONFIRM_ACTION in buttons_of(forced["blocks"])
