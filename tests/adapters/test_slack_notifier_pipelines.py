"""`SlackNotifier` for scheduled pipelines, against the local Slack stand-in: the pipeline's summary is
its thread, each reported run is one line in it, and the idle-pipeline questions and farewells reach
every owner, by DM or, when Slack will not deliver the DM, in the platform channel with a mention."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from structlog.testing import capture_logs

from daemon.adapters.slack_notifier import SlackDeliveryError, SlackNotifier
from daemon.contract.models import IdlePrompt, PipelineOut, RunOut
from daemon.slack.idle_messages import IDLE_DELETE_ACTION, IDLE_KEEP_ACTION
from daemon.slack.web_client import make_web_client
from scripts.devtools.slack_standin import SlackStandin
from tests.fixtures.slack import BOT_TOKEN, CHANNEL, wire_pipeline, wire_run

OWNER = "U0OWNER1"
PLATFORM_CHANNEL = "C0PLATFORM"
PIPELINE_ID = "p-0123456789ab"
CREATED = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
IDLE_SINCE = datetime(2024, 3, 31, 9, 0, tzinfo=UTC)
DEADLINE = datetime(2024, 4, 7, 9, 0, tzinfo=UTC)
RUN = wire_run(
    id="r-00000000beef",
    kind="pipeline",
    window="(2024-01-07T00:00:00, 2024-01-08T00:00:00]",
    topic=f"replay.orders.{PIPELINE_ID}",
    tps=500,
    requester=OWNER,
    state="succeeded",
    rows_planned=None,
    rows_selected=1_200,
    confirmed=1_200,
    pipeline_id=PIPELINE_ID,
)


def _run(**changes: Any) -> RunOut:
    return RunOut.model_validate({**RUN.model_dump(), **changes})


def _pipeline(**changes: Any) -> PipelineOut:
    """A pipeline as the daemon hands it to the notifier."""
    fields: dict[str, Any] = {
        "owners": [OWNER, "U0COOWNER"],
        "created_at": CREATED,
        "next_run_at": datetime(2024, 3, 1, 9, 15, tzinfo=UTC),
    }
    return wire_pipeline(**{**fields, **changes})


PROMPT = IdlePrompt(pipeline=_pipeline(), idle_since=IDLE_SINCE, deadline=DEADLINE, keep_days=14)


@pytest.fixture
def notifier(slack_standin: SlackStandin) -> SlackNotifier:
    return SlackNotifier(
        client=make_web_client(BOT_TOKEN, slack_standin.base_url), default_channel=PLATFORM_CHANNEL
    )


def _buttons(blocks: list[dict[str, Any]]) -> dict[str, str]:
    [actions] = [block for block in blocks if block["type"] == "actions"]
    return {button["action_id"]: button["value"] for button in actions["elements"]}


# --- the pipeline's thread -----------------------------------------------------------------------------


def test_a_new_pipeline_posts_its_summary_in_its_channel_and_returns_the_thread(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    ts = notifier.pipeline_scheduled(_pipeline())

    [summary] = slack_standin.messages(CHANNEL)
    assert summary.ts == ts and summary.thread_ts is None
    shown = repr(summary.blocks)
    for expected in (PIPELINE_ID, "orders", "`every=15m`", "`updated_at`", "500/s", "<@U0OWNER1>"):
        assert expected in shown
    assert "2024-03-01 09:15 UTC" in shown  # the next run


def test_a_pipeline_scheduled_without_a_channel_is_not_announced(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    assert notifier.pipeline_scheduled(_pipeline(slack_channel=None)) is None
    assert slack_standin.calls() == []


def test_a_summary_slack_refuses_is_logged_and_leaves_the_pipeline_without_a_thread(
    notifier: SlackNotifier,
) -> None:
    with capture_logs() as logs:
        assert notifier.pipeline_scheduled(_pipeline(slack_channel="C0GONE404")) is None

    assert [entry["event"] for entry in logs] == ["slack pipeline summary not delivered"]


def test_a_pipeline_run_is_one_line_in_the_pipeline_thread_and_the_summary_is_not_edited(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    ts = notifier.pipeline_scheduled(_pipeline())
    assert ts is not None  # the summary was posted

    notifier.run_finished(_run(slack_ts=ts))

    summary, line = slack_standin.thread(CHANNEL, ts)
    assert line.text == (
        ":white_check_mark: p-0123456789ab run r-00000000beef: 1,200 events confirmed "
        "(watermark → 2024-01-08T00:00:00)"
    )
    assert summary.edits == 0
    assert slack_standin.calls("chat.update") == []
    print(slack_standin.render_thread(CHANNEL, ts))


def test_a_failed_pipeline_run_gives_the_reason_and_a_next_step_in_the_thread(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    ts = notifier.pipeline_scheduled(_pipeline())
    assert ts is not None  # the summary was posted
    failed = _run(
        slack_ts=ts,
        state="failed",
        confirmed=3,
        failure_reason="could not launch the job: no spark",
        failure_kind="launch",
    )

    notifier.run_finished(failed)

    line = slack_standin.thread(CHANNEL, ts)[-1]
    assert "run r-00000000beef failed after 3 events were confirmed: could not launch the job" in line.text
    assert "*Next step:* the job never started" in line.text
    assert "the next scheduled run sends this range again" in line.text


def test_a_pipeline_run_without_a_thread_posts_its_line_in_the_channel(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    notifier.run_finished(RUN)

    [line] = slack_standin.messages(CHANNEL)
    assert line.thread_ts is None
    assert line.text.startswith(":white_check_mark: p-0123456789ab run r-00000000beef")
    assert slack_standin.calls("chat.update") == []


# --- idle pipelines: the owners' DMs ------------------------------------------------------------------


def test_the_idle_prompt_is_a_dm_with_keep_and_delete_buttons(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    channel = notifier.idle_prompt(PROMPT, OWNER)

    assert channel == "D0OWNER1"
    [opened] = slack_standin.calls("conversations.open")
    assert opened.params["users"] == OWNER
    [prompt] = slack_standin.messages(channel)
    assert PIPELINE_ID in prompt.text and "idle" in prompt.text
    assert "never published anything since it was created on 2024-03-01 09:00 UTC" in prompt.text
    assert "de-provisioned after *2024-04-07 09:00 UTC*" in prompt.text
    assert _buttons(prompt.blocks) == {
        IDLE_KEEP_ACTION: f"{PIPELINE_ID}:14",
        IDLE_DELETE_ACTION: PIPELINE_ID,
    }
    assert "Keep for 14 more days" in repr(prompt.blocks)
    assert slack_standin.messages(PLATFORM_CHANNEL) == []


def test_the_idle_prompt_says_when_the_pipeline_last_published(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    published = dataclasses.replace(
        PROMPT, pipeline=_pipeline(last_published_at=datetime(2024, 3, 1, 10, 0, tzinfo=UTC))
    )

    [prompt] = slack_standin.messages(notifier.idle_prompt(published, OWNER))

    assert "It last published on 2024-03-01 10:00 UTC" in prompt.text


@pytest.mark.parametrize(
    ("method", "error"),
    [
        ("conversations.open", "user_not_found"),
        ("conversations.open", "cannot_dm_bot"),
        ("conversations.open", "user_disabled"),
        ("conversations.open", "account_inactive"),
        ("chat.postMessage", "messages_tab_disabled"),
        ("chat.postMessage", "not_allowed"),
        ("chat.postMessage", "channel_not_found"),
    ],
)
def test_an_undeliverable_dm_goes_to_the_platform_channel_mentioning_the_owner(
    notifier: SlackNotifier, slack_standin: SlackStandin, method: str, error: str
) -> None:
    slack_standin.fail_next(method, error=error)

    channel = notifier.idle_prompt(PROMPT, OWNER)

    assert channel == PLATFORM_CHANNEL
    [prompt] = slack_standin.messages(PLATFORM_CHANNEL)
    assert prompt.text.startswith(":zzz: <@U0OWNER1>: Pipeline `p-0123456789ab`")
    assert set(_buttons(prompt.blocks)) == {IDLE_KEEP_ACTION, IDLE_DELETE_ACTION}
    assert slack_standin.messages("D0OWNER1") == []


def test_an_undeliverable_dm_without_a_platform_channel_is_the_delivery_error(
    slack_standin: SlackStandin,
) -> None:
    notifier = SlackNotifier(client=make_web_client(BOT_TOKEN, slack_standin.base_url))
    slack_standin.fail_next("conversations.open", error="user_not_found")

    with pytest.raises(SlackDeliveryError) as caught:
        notifier.idle_prompt(PROMPT, OWNER)

    assert (caught.value.method, caught.value.error) == ("conversations.open", "user_not_found")
    assert slack_standin.messages() == []


def test_a_transient_slack_failure_is_raised_for_a_later_retry_not_sent_to_the_channel(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    slack_standin.fail_next("conversations.open", error="internal_error")

    with pytest.raises(SlackDeliveryError, match="internal_error"):
        notifier.idle_prompt(PROMPT, OWNER)

    assert slack_standin.messages() == []


def test_the_removal_dm_says_what_was_removed_and_why(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    removed = ["its schedule", f"its topic replay.orders.{PIPELINE_ID}"]

    channel = notifier.pipeline_removed(_pipeline(), OWNER, removed, "deleted by <@U0COOWNER>")

    [farewell] = slack_standin.messages(channel)
    assert channel == "D0OWNER1"
    assert farewell.text.startswith(
        ":wastebasket: Pipeline `p-0123456789ab` was removed (deleted by <@U0COOWNER>). "
        "Removed: its schedule, its topic replay.orders.p-0123456789ab."
    )
    assert "its run history stays" in farewell.text


def test_a_removal_dm_slack_will_not_deliver_goes_to_the_platform_channel(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    slack_standin.fail_next("conversations.open", error="account_inactive")

    channel = notifier.pipeline_removed(_pipeline(), OWNER, ["its schedule"], "no answer within 7 days")

    [farewell] = slack_standin.messages(PLATFORM_CHANNEL)
    assert channel == PLATFORM_CHANNEL
    assert farewell.text.startswith(":wastebasket: <@U0OWNER1>: Pipeline `p-0123456789ab` was removed")
