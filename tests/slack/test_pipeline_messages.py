"""`daemon.slack` renders pipelines and idle-pipeline prompts purely: examples of what people read, and
properties that hold for any input (Slack's size limits, escaping of whatever a user or a job wrote)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.contract.models import IdlePipelineOut, PipelineDetailOut, PipelineOut, RunOut, ScheduleBody
from daemon.slack import blocks, idle_messages, pipeline_messages
from daemon.slack.blocks import Message
from daemon.slack.views import PipelineView
from tests.fixtures.slack import changed
from tests.fixtures.slack_messages import (
    API_RUN,
    RUN,
    any_text,
    assert_no_unescaped_control,
    assert_within_slack_limits,
    run_views,
)

# --- scheduled pipelines ------------------------------------------------------------------------------

PIPELINE = PipelineView(
    pipeline_id="p-0123456789ab",
    source="orders",
    schedule="every=15m",
    state="active",
    watermark_column="updated_at",
    watermark="2024-01-07T00:00:00",
    tps=500,
    topic="replay.orders.p-0123456789ab",
    owners=("U0ALICE", "U0BOB"),
    next_run_at=datetime(2024, 5, 1, 10, 15, tzinfo=UTC),
    last_published_at=None,
    created_at=datetime(2024, 3, 1, 9, 0, tzinfo=UTC),
)
T_IDLE = datetime(2024, 4, 1, tzinfo=UTC)
API_PIPELINE = PipelineOut.model_validate(
    {
        "id": "p-0123456789ab",
        "source": "orders",
        "schedule": "every=15m",
        "state": "active",
        "watermark_column": "updated_at",
        "watermark": "2024-01-07T00:00:00",
        "lookback_seconds": 0,
        "tps": 500,
        "topic": "replay.orders.p-0123456789ab",
        "owners": ["U0ALICE", "U0BOB"],
        "next_run_at": "2024-05-01T10:15:00Z",
        "last_published_at": None,
        "created_at": "2024-03-01T09:00:00+00:00",
        "slack_channel": "C0REPLAYS",
        "slack_ts": "1714557600.000100",
    }
)
PIPELINE_RUN = changed(
    RUN,
    id="r-00000000beef",
    window="(2024-01-07T00:00:00, 2024-01-08T00:00:00]",
    topic="replay.orders.p-0123456789ab",
    state="succeeded",
    confirmed=1_200,
    pipeline_id="p-0123456789ab",
    slack_ts="1714557600.000100",
)


def _fields_of(message: Message) -> dict[str, str]:
    [fields] = [block["fields"] for block in message.blocks if "fields" in block]
    return {f["text"].split("\n")[0]: f["text"].split("\n", 1)[1] for f in fields}


def _buttons_of(message: Message) -> dict[str, str]:
    [actions] = [block for block in message.blocks if block["type"] == "actions"]
    return {button["action_id"]: button["value"] for button in actions["elements"]}


def test_a_pipeline_summary_names_schedule_watermark_topic_rate_owners_and_next_run() -> None:
    message = pipeline_messages.pipeline_summary(PIPELINE)

    assert _fields_of(message) == {
        "*Source*": "orders",
        "*Schedule*": "`every=15m`",
        "*Watermark column*": "`updated_at` (committed: `2024-01-07T00:00:00`)",
        "*Target topic*": "`replay.orders.p-0123456789ab`",
        "*Rate*": "500/s",
        "*Owners*": "<@U0ALICE>, <@U0BOB>",
        "*Next run*": "2024-05-01 10:15 UTC",
        "*State*": ":calendar: active",
    }
    assert "p-0123456789ab" in message.text
    assert "reports in this thread" in repr(message.blocks)


def test_the_view_of_an_api_pipeline_is_what_messages_show() -> None:
    assert PipelineView.of(API_PIPELINE) == PIPELINE


def test_the_scheduling_reply_gives_the_id_and_the_next_run() -> None:
    text = pipeline_messages.pipeline_scheduled_reply(PIPELINE, announced=True).text

    assert text.startswith(":calendar: Scheduled as `p-0123456789ab`: orders `every=15m`")
    assert "Next run: 2024-05-01 10:15 UTC" in text
    assert "in the pipeline's thread" in text


def test_a_paused_pipeline_has_no_next_run_but_says_how_to_resume() -> None:
    paused = dataclasses.replace(PIPELINE, state="paused")

    assert _fields_of(pipeline_messages.pipeline_summary(paused))["*Next run*"] == (
        "paused (`/replay resume p-0123456789ab`)"
    )
    assert (
        "no runs until `/replay resume p-0123456789ab`"
        in pipeline_messages.pipeline_changed(paused, "pause").text
    )


def test_a_pipeline_run_is_one_line_with_the_confirmed_count_and_the_new_watermark() -> None:
    assert pipeline_messages.pipeline_run_line(PIPELINE_RUN).text == (
        ":white_check_mark: p-0123456789ab run r-00000000beef: 1,200 events confirmed "
        "(watermark → 2024-01-08T00:00:00)"
    )


def test_a_failed_pipeline_run_gives_the_reason_and_says_the_next_run_retries() -> None:
    failed = changed(PIPELINE_RUN, state="failed", confirmed=7, failure_reason="delivery failed: <timeout>")

    text = pipeline_messages.pipeline_run_line(failed).text

    assert text.startswith(
        ":x: p-0123456789ab run r-00000000beef failed after 7 events were confirmed: "
        "delivery failed: &lt;timeout&gt;"
    )
    assert "*Next step:* check the cluster; the watermark did not move" in text


def test_the_detail_shows_the_last_runs_and_when_it_last_published() -> None:
    published = datetime(2024, 4, 30, 8, 0, tzinfo=UTC)
    detail = PipelineDetailOut(**{**dict(API_PIPELINE), "last_published_at": published}, runs=[API_RUN])

    shown = repr(pipeline_messages.pipeline_detail(detail).blocks)

    assert "`r-0123456789ab`" in shown
    assert "Last published: 2024-04-30 08:00 UTC" in shown
    empty = PipelineDetailOut(**dict(API_PIPELINE), runs=[])
    assert "no runs yet" in repr(pipeline_messages.pipeline_detail(empty).blocks)


def test_idle_pipelines_are_listed_with_their_deadline() -> None:
    idle = IdlePipelineOut(**dict(API_PIPELINE), deadline=datetime(2024, 5, 8, 9, 0, tzinfo=UTC))

    text = pipeline_messages.pipeline_list([idle], "idle").text

    assert "`p-0123456789ab`" in text
    assert "removed after 2024-05-08 09:00 UTC unless kept" in text


def test_the_idle_prompt_asks_keep_or_delete_about_a_pipeline_that_never_published() -> None:
    message = idle_messages.idle_prompt(
        PIPELINE,
        idle_since=datetime(2024, 3, 31, 9, 0, tzinfo=UTC),
        deadline=datetime(2024, 4, 7, 9, 0, tzinfo=UTC),
        keep_days=14,
    )

    assert "Pipeline `p-0123456789ab` (orders `every=15m` → `replay.orders.p-0123456789ab`) is idle" in (
        message.text
    )
    assert "never published anything since it was created on 2024-03-01 09:00 UTC" in message.text
    assert "de-provisioned after *2024-04-07 09:00 UTC*" in message.text
    buttons = _buttons_of(message)
    assert buttons == {
        idle_messages.IDLE_KEEP_ACTION: "p-0123456789ab:14",
        idle_messages.IDLE_DELETE_ACTION: "p-0123456789ab",
    }
    assert idle_messages.read_idle_button(buttons[idle_messages.IDLE_KEEP_ACTION]) == ("p-0123456789ab", 14)
    assert idle_messages.read_idle_button(buttons[idle_messages.IDLE_DELETE_ACTION]) == (
        "p-0123456789ab",
        None,
    )


def test_the_idle_prompt_in_a_channel_mentions_the_owner_first() -> None:
    published = dataclasses.replace(PIPELINE, last_published_at=datetime(2024, 3, 2, 9, 0, tzinfo=UTC))

    text = idle_messages.idle_prompt(
        published, idle_since=T_IDLE, deadline=T_IDLE, keep_days=30, owner="U0ALICE"
    ).text

    assert text.startswith(":zzz: <@U0ALICE>: Pipeline `p-0123456789ab`")
    assert "It last published on 2024-03-02 09:00 UTC" in text


def test_a_long_owner_list_is_capped_so_no_mention_is_cut() -> None:
    owners = ("x" * 1_000, *(f"U0OWNER{i:03d}" for i in range(40)))

    shown = _fields_of(pipeline_messages.pipeline_summary(dataclasses.replace(PIPELINE, owners=owners)))[
        "*Owners*"
    ]

    assert shown.endswith("<@U0OWNER006> and 33 more")
    assert_no_unescaped_control(blocks.notice(shown))


@pytest.mark.parametrize("value", ["p-0123456789ab:x", "r-0123456789ab", "p-0123456789ab:14:1", "", "p-XYZ"])
def test_idle_button_values_we_did_not_write_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="not an idle-pipeline button"):
        idle_messages.read_idle_button(value)


def test_a_removal_keeps_the_mention_in_its_reason_and_escapes_the_rest() -> None:
    text = idle_messages.pipeline_removed(
        PIPELINE, removed=["its schedule", "its topic a<b>"], reason="deleted by <@U0ALICE> & <!channel>"
    ).text

    assert "was removed (deleted by <@U0ALICE> &amp; &lt;!channel&gt;)" in text
    assert "Removed: its schedule, its topic a&lt;b&gt;." in text


def test_unschedule_and_live_schedule_confirmations_carry_the_request_in_both_buttons() -> None:
    unschedule = pipeline_messages.unschedule_confirmation(PIPELINE, value="v", expires_in_s=900)
    live = pipeline_messages.live_schedule_confirmation(
        ScheduleBody(source="orders", every="15m", watermark="updated_at"),
        live_topic="orders",
        value="w",
        expires_in_s=900,
    )

    assert _buttons_of(unschedule) == {
        pipeline_messages.UNSCHEDULE_CONFIRM_ACTION: "v",
        pipeline_messages.UNSCHEDULE_KEEP_ACTION: "v",
    }
    assert _buttons_of(live) == {
        pipeline_messages.SCHEDULE_LIVE_CONFIRM_ACTION: "w",
        pipeline_messages.SCHEDULE_LIVE_CANCEL_ACTION: "w",
    }
    assert "*live* topic `orders` on every run (`every=15m`)" in live.text


maybe_time = st.one_of(st.none(), st.datetimes(timezones=st.just(UTC)))
pipeline_views = st.builds(
    PipelineView,
    pipeline_id=st.from_regex(r"p-[0-9a-f]{12}", fullmatch=True),
    source=any_text,
    schedule=any_text,
    state=st.sampled_from(["active", "paused", "archived"]),
    watermark_column=any_text,
    watermark=st.one_of(st.none(), any_text),
    tps=st.integers(min_value=1, max_value=10_000_000),
    topic=any_text,
    owners=st.lists(st.one_of(st.from_regex(r"U[A-Z0-9]{8}", fullmatch=True), any_text), max_size=30).map(
        tuple
    ),
    next_run_at=maybe_time,
    last_published_at=maybe_time,
    created_at=maybe_time,
)


def _as_api(view: PipelineView) -> PipelineOut:
    return PipelineOut.model_validate(
        {
            "id": view.pipeline_id,
            "source": view.source,
            "schedule": view.schedule,
            "state": view.state,
            "watermark_column": view.watermark_column,
            "watermark": view.watermark,
            "lookback_seconds": 0,
            "tps": view.tps,
            "topic": view.topic,
            "owners": list(view.owners),
            "next_run_at": view.next_run_at,
            "last_published_at": view.last_published_at,
            "created_at": view.created_at or T_IDLE,
            "slack_channel": None,
            "slack_ts": None,
        }
    )


def _button_limits(message: Message) -> None:
    for block in message.blocks:
        for element in block.get("elements", []) if block["type"] == "actions" else []:
            assert len(element["value"]) <= 2000 and len(element["text"]["text"]) <= 75


@given(
    pipeline_views, st.one_of(st.none(), st.from_regex(r"U[A-Z0-9]{8}", fullmatch=True), any_text), any_text
)
def test_every_pipeline_message_fits_slacks_limits_and_escapes_its_input(
    view: PipelineView, owner: str | None, reason: str
) -> None:
    messages = [
        pipeline_messages.pipeline_summary(view),
        pipeline_messages.pipeline_scheduled_reply(view, announced=True),
        pipeline_messages.pipeline_changed(view, "resume"),
        pipeline_messages.pipeline_detail(PipelineDetailOut(**dict(_as_api(view)), runs=[API_RUN] * 5)),
        pipeline_messages.pipeline_list(
            [IdlePipelineOut(**dict(_as_api(view)), deadline=view.next_run_at or T_IDLE)] * 20, "idle"
        ),
        pipeline_messages.unschedule_confirmation(view, value="v", expires_in_s=900),
        idle_messages.idle_prompt(view, idle_since=T_IDLE, deadline=T_IDLE, keep_days=365, owner=owner),
        idle_messages.pipeline_removed(view, removed=[reason, view.topic], reason=reason, owner=owner),
        idle_messages.deleted(view),
    ]
    for message in messages:
        assert_within_slack_limits(message)
        assert_no_unescaped_control(message)
        _button_limits(message)


@given(run_views, st.from_regex(r"p-[0-9a-f]{12}", fullmatch=True))
def test_every_pipeline_run_line_fits_and_escapes(run: RunOut, pipeline_id: str) -> None:
    message = pipeline_messages.pipeline_run_line(changed(run, pipeline_id=pipeline_id))

    assert_within_slack_limits(message)
    assert_no_unescaped_control(message)


def test_a_pipelines_card_names_its_kafka_cluster_unless_it_is_the_default() -> None:
    elsewhere = str(
        pipeline_messages.pipeline_fields(PipelineView.of(API_PIPELINE.model_copy(update={"cluster": "eu"})))
    )
    here = str(pipeline_messages.pipeline_fields(PipelineView.of(API_PIPELINE)))

    assert f"`{API_PIPELINE.topic}` on `eu`" in elsewhere
    assert " on `" not in here
