"""`daemon.slack.messages` is pure: examples of what people read, and properties that hold for any
input (Slack's size limits, escaping of whatever a user or a job wrote)."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.slack import messages as slack_blocks
from daemon.slack.messages import Message
from daemon.usecases.notifier import RunView

RUN = RunView(
    run_id="r-0123456789ab",
    source="orders",
    window="2024-01-01..2024-01-07",
    topic="replay.orders.r-0123456789ab",
    tps=10_000,
    requester="U0ALICE",
    state="running",
    rows=2_100_000,
    eta_s=210.0,
    channel="C0REPLAYS",
)
API_RUN: dict[str, Any] = {
    "id": "r-0123456789ab",
    "state": "succeeded",
    "source": "orders",
    "window": "2024-01-01..2024-01-02",
    "topic": "replay.orders.r-0123456789ab",
    "tps": 100,
    "requester": "U0ALICE",
    "rows": 600,
    "confirmed": 600,
    "achieved_tps": 99.2,
    "failure_reason": None,
    "started_at": "2024-05-01T10:00:00+00:00",
    "ended_at": "2024-05-01T10:00:06.500000+00:00",
    "slack_channel": "C0REPLAYS",
    "slack_ts": "1714557600.000100",
}
PLAN = {
    "source": "orders",
    "window": "2024-01-01..2024-01-02",
    "rows": 600,
    "tps": 100,
    "eta_s": 6.0,
    "topic": "orders",
    "partitions": 3,
    "workers": 2,
}
STATES = ["queued", "submitted", "running", "cancelling", "succeeded", "failed", "cancelled", "skipped"]


def texts(message: Message) -> list[str]:
    """Every piece of mrkdwn Slack would parse (plain_text is shown as is, so it needs no escaping)."""
    found = [message.text]
    for block in message.blocks:
        if "text" in block and block["text"]["type"] == "mrkdwn":
            found.append(block["text"]["text"])
        found += [f["text"] for f in block.get("fields", [])]
        found += [
            e["text"] if isinstance(e["text"], str) else e["text"]["text"] for e in block.get("elements", [])
        ]
    return found


def assert_within_slack_limits(message: Message) -> None:
    assert message.text.strip()
    assert len(message.blocks) <= 50
    for block in message.blocks:
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= 150
        if block["type"] == "section":
            assert "text" in block or "fields" in block
            assert len(block.get("text", {}).get("text", "")) <= 3000
            assert len(block.get("fields", [])) <= 10
            assert all(len(f["text"]) <= 2000 for f in block.get("fields", []))
        if block["type"] == "context":
            assert len(block["elements"]) <= 10
    json.dumps(message.blocks)  # serialisable as Slack receives it


def assert_no_unescaped_control(message: Message) -> None:
    """No `<…>` of our input's making: only the mentions we build ourselves."""
    for text in texts(message):
        bare = re.sub(r"<@[UW][A-Z0-9]{2,20}>", "", text)
        assert "<" not in bare and ">" not in bare, text


# --- examples ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "n/a"), (0.4, "0.4s"), (42, "42s"), (200, "3m 20s"), (7_500, "2h 05m"), (90_000, "1d 1h")],
)
def test_durations_read_at_a_glance(seconds: float | None, shown: str) -> None:
    assert slack_blocks.human_duration(seconds) == shown


def test_the_parent_names_source_window_rows_topic_rate_eta_and_requester() -> None:
    message = slack_blocks.run_parent(RUN)

    fields = {f["text"].split("\n")[0]: f["text"].split("\n")[1] for f in message.blocks[1]["fields"]}
    assert fields == {
        "*Source*": "orders",
        "*Window*": "`2024-01-01..2024-01-07` (UTC)",
        "*Rows*": "2,100,000",
        "*Target topic*": "`replay.orders.r-0123456789ab`",
        "*Rate*": "10,000/s",
        "*ETA*": "3m 30s",
        "*Requested by*": "<@U0ALICE>",
        "*State*": ":arrow_forward: running",
    }


def test_the_final_parent_shows_the_confirmed_count_rate_and_duration() -> None:
    final = dataclasses.replace(
        RUN, state="succeeded", confirmed=2_100_000, achieved_tps=9_990.4, duration_s=211
    )

    shown = repr(slack_blocks.run_parent(final).blocks)

    assert "2,100,000 of 2,100,000" in shown
    assert "9,990/s" in shown
    assert "3m 31s" in shown
    assert "Final report in the thread" in shown


def test_progress_shows_share_rate_and_time_left() -> None:
    message = slack_blocks.progress_reply(dataclasses.replace(RUN, confirmed=700_000, rate=9_800.0))

    assert message.text == (
        ":hourglass_flowing_sand: *700,000* of 2,100,000 confirmed (33%) · 9,800/s · about 2m 23s left"
    )


def test_success_gives_the_broker_confirmed_count() -> None:
    done = dataclasses.replace(
        RUN, state="succeeded", confirmed=2_099_998, achieved_tps=9_990.0, duration_s=210.2
    )

    assert slack_blocks.final_reply(done).text.startswith(
        ":white_check_mark: *Done.* The broker confirmed *2,099,998* events (of 2,100,000 selected)"
    )


@pytest.mark.parametrize(
    ("reason", "advice"),
    [
        ("could not launch the job: spark-submit not found", "the job never started"),
        ("job process lost (last output: ...)", "disappeared"),
        ("delivery failed: Broker: Not enough in-sync replicas", "check the cluster"),
        ("something else", "/replay status r-0123456789ab"),
    ],
)
def test_a_failure_gives_the_reason_and_a_next_step(reason: str, advice: str) -> None:
    text = slack_blocks.final_reply(dataclasses.replace(RUN, state="failed", confirmed=5, reason=reason)).text

    assert f"*Reason:* {reason}" in text
    assert advice in text


def test_a_cancelled_run_suggests_the_command_to_start_again() -> None:
    text = slack_blocks.final_reply(dataclasses.replace(RUN, state="cancelled", confirmed=42)).text

    assert "*42* of 2,100,000 events were confirmed before it stopped" in text
    assert "`/replay orders 2024-01-01..2024-01-07 tps=10000`" in text


def test_an_input_error_names_the_token_why_and_usage() -> None:
    message = slack_blocks.input_error("tps=abc", "'abc' is not a number", "/replay <source> <window>")

    assert message.text == (
        ":warning: `tps=abc`: 'abc' is not a number\n*Usage:* `/replay &lt;source&gt; &lt;window&gt;`"
    )


def test_a_token_with_a_backtick_is_quoted_instead_of_breaking_the_code_span() -> None:
    assert slack_blocks.code("a`b") == "“a`b”"


def test_view_of_an_api_run_computes_duration_and_eta() -> None:
    view = slack_blocks.view_of(API_RUN)

    assert (view.duration_s, view.eta_s, view.thread_ts) == (6.5, 6.0, "1714557600.000100")


def test_plan_summary_and_live_confirmation() -> None:
    plan = slack_blocks.plan_summary(PLAN)
    ask = slack_blocks.live_confirmation(PLAN, value="v", expires_in_s=900)

    assert plan.text == "Plan: 600 rows of orders 2024-01-01..2024-01-02 → orders at 100/s, about 6.0s"
    buttons = ask.blocks[-1]["elements"]
    assert [(b["action_id"], b["value"]) for b in buttons] == [
        (slack_blocks.CONFIRM_ACTION, "v"),
        (slack_blocks.CANCEL_ACTION, "v"),
    ]
    assert "Confirm within 15m 00s" in ask.text


def test_a_button_value_over_slacks_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="2000"):
        slack_blocks.live_confirmation(PLAN, value="x" * 2001, expires_in_s=900)


def test_long_run_lists_are_cut_with_a_count_of_the_rest() -> None:
    message = slack_blocks.run_list([API_RUN] * 20, "yours")

    assert message.text.count("`r-0123456789ab`") == slack_blocks.MAX_LISTED_RUNS
    assert message.text.endswith("…and 5 more")


def test_mentions_only_for_slack_user_ids() -> None:
    assert (slack_blocks.mention("U0ALICE"), slack_blocks.mention("alice<!here>")) == (
        "<@U0ALICE>",
        "alice&lt;!here&gt;",
    )


# --- properties -------------------------------------------------------------------------------------

any_text = st.text(min_size=0, max_size=5_000)
run_views = st.builds(
    RunView,
    run_id=st.from_regex(r"r-[0-9a-f]{12}", fullmatch=True),
    source=st.text(min_size=1, max_size=80),
    window=any_text,
    topic=any_text,
    tps=st.integers(min_value=1, max_value=10_000_000),
    requester=st.one_of(st.from_regex(r"U[A-Z0-9]{8}", fullmatch=True), any_text),
    state=st.sampled_from(STATES),
    rows=st.one_of(st.none(), st.integers(min_value=0, max_value=10**12)),
    confirmed=st.integers(min_value=0, max_value=10**12),
    rate=st.one_of(st.none(), st.floats(min_value=0, max_value=1e9)),
    eta_s=st.one_of(st.none(), st.floats(min_value=0, max_value=1e9)),
    achieved_tps=st.one_of(st.none(), st.floats(min_value=0, max_value=1e9)),
    duration_s=st.one_of(st.none(), st.floats(min_value=0, max_value=1e9)),
    reason=st.one_of(st.none(), any_text),
)


@given(run_views)
def test_every_thread_message_fits_slacks_limits_and_escapes_its_input(run: RunView) -> None:
    for render in (slack_blocks.run_parent, slack_blocks.progress_reply, slack_blocks.final_reply):
        message = render(run)
        assert_within_slack_limits(message)
        assert_no_unescaped_control(message)


@given(run_views.filter(lambda r: r.state in ("failed", "cancelled")))
def test_a_run_that_did_not_succeed_always_gets_a_next_step(run: RunView) -> None:
    assert "*Next step:* " in slack_blocks.final_reply(run).text


@given(st.text(min_size=1, max_size=300).filter(lambda t: "`" not in t and t.strip()), any_text, any_text)
def test_an_input_error_always_shows_the_token(token: str, reason: str, usage: str) -> None:
    message = slack_blocks.input_error(token, reason, usage)

    assert f"`{slack_blocks.escape(slack_blocks.clip(token, slack_blocks.MAX_TOKEN_SHOWN))}`" in message.text
    assert_within_slack_limits(message)
    assert_no_unescaped_control(message)


@given(any_text)
def test_refusals_and_outages_escape_the_message(text: str) -> None:
    for message in (slack_blocks.refusal(text, "/replay <source>"), slack_blocks.unavailable(text)):
        assert_within_slack_limits(message)
        assert_no_unescaped_control(message)


def test_progress_before_a_rate_is_known_shows_the_target_rate() -> None:
    message = slack_blocks.progress_reply(dataclasses.replace(RUN, confirmed=10_000, rate=0.0))

    assert "· target 10,000/s · about 3m 29s left" in message.text


# --- scheduled pipelines ------------------------------------------------------------------------------

PIPELINE = slack_blocks.PipelineView(
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
API_PIPELINE: dict[str, Any] = {
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
PIPELINE_RUN = dataclasses.replace(
    RUN,
    run_id="r-00000000beef",
    window="(2024-01-07T00:00:00, 2024-01-08T00:00:00]",
    topic="replay.orders.p-0123456789ab",
    state="succeeded",
    confirmed=1_200,
    pipeline_id="p-0123456789ab",
    thread_ts="1714557600.000100",
)


def _fields_of(message: Message) -> dict[str, str]:
    [fields] = [block["fields"] for block in message.blocks if "fields" in block]
    return {f["text"].split("\n")[0]: f["text"].split("\n", 1)[1] for f in fields}


def _buttons_of(message: Message) -> dict[str, str]:
    [actions] = [block for block in message.blocks if block["type"] == "actions"]
    return {button["action_id"]: button["value"] for button in actions["elements"]}


def test_a_pipeline_summary_names_schedule_watermark_topic_rate_owners_and_next_run() -> None:
    message = slack_blocks.pipeline_summary(PIPELINE)

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


def test_the_api_and_the_store_give_the_same_pipeline_view() -> None:
    assert slack_blocks.PipelineView.of_api(API_PIPELINE) == PIPELINE


def test_the_scheduling_reply_gives_the_id_and_the_next_run() -> None:
    text = slack_blocks.pipeline_scheduled_reply(PIPELINE, announced=True).text

    assert text.startswith(":calendar: Scheduled as `p-0123456789ab`: orders `every=15m`")
    assert "Next run: 2024-05-01 10:15 UTC" in text
    assert "in the pipeline's thread" in text


def test_a_paused_pipeline_has_no_next_run_but_says_how_to_resume() -> None:
    paused = dataclasses.replace(PIPELINE, state="paused")

    assert _fields_of(slack_blocks.pipeline_summary(paused))["*Next run*"] == (
        "paused (`/replay resume p-0123456789ab`)"
    )
    assert (
        "no runs until `/replay resume p-0123456789ab`" in slack_blocks.pipeline_changed(paused, "pause").text
    )


def test_a_pipeline_run_is_one_line_with_the_confirmed_count_and_the_new_watermark() -> None:
    assert slack_blocks.pipeline_run_line(PIPELINE_RUN).text == (
        ":white_check_mark: p-0123456789ab run r-00000000beef: 1,200 events confirmed "
        "(watermark → 2024-01-08T00:00:00)"
    )


def test_a_failed_pipeline_run_gives_the_reason_and_says_the_next_run_retries() -> None:
    failed = dataclasses.replace(
        PIPELINE_RUN, state="failed", confirmed=7, reason="delivery failed: <timeout>"
    )

    text = slack_blocks.pipeline_run_line(failed).text

    assert text.startswith(
        ":x: p-0123456789ab run r-00000000beef failed after 7 events were confirmed: "
        "delivery failed: &lt;timeout&gt;"
    )
    assert "*Next step:* check the cluster; the watermark did not move" in text


def test_the_detail_shows_the_last_runs_and_when_it_last_published() -> None:
    detail = {**API_PIPELINE, "runs": [API_RUN], "last_published_at": "2024-04-30T08:00:00+00:00"}

    shown = repr(slack_blocks.pipeline_detail(detail).blocks)

    assert "`r-0123456789ab`" in shown
    assert "Last published: 2024-04-30 08:00 UTC" in shown
    assert "no runs yet" in repr(slack_blocks.pipeline_detail({**API_PIPELINE, "runs": []}).blocks)


def test_idle_pipelines_are_listed_with_their_deadline() -> None:
    idle = {**API_PIPELINE, "deadline": "2024-05-08T09:00:00+00:00"}

    text = slack_blocks.pipeline_list([idle], "idle").text

    assert "`p-0123456789ab`" in text
    assert "removed after 2024-05-08 09:00 UTC unless kept" in text


def test_the_idle_prompt_asks_keep_or_delete_about_a_pipeline_that_never_published() -> None:
    message = slack_blocks.idle_prompt(
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
        slack_blocks.IDLE_KEEP_ACTION: "p-0123456789ab:14",
        slack_blocks.IDLE_DELETE_ACTION: "p-0123456789ab",
    }
    assert slack_blocks.read_idle_button(buttons[slack_blocks.IDLE_KEEP_ACTION]) == ("p-0123456789ab", 14)
    assert slack_blocks.read_idle_button(buttons[slack_blocks.IDLE_DELETE_ACTION]) == ("p-0123456789ab", None)


def test_the_idle_prompt_in_a_channel_mentions_the_owner_first() -> None:
    published = dataclasses.replace(PIPELINE, last_published_at=datetime(2024, 3, 2, 9, 0, tzinfo=UTC))

    text = slack_blocks.idle_prompt(
        published, idle_since=T_IDLE, deadline=T_IDLE, keep_days=30, owner="U0ALICE"
    ).text

    assert text.startswith(":zzz: <@U0ALICE>: Pipeline `p-0123456789ab`")
    assert "It last published on 2024-03-02 09:00 UTC" in text


def test_a_long_owner_list_is_capped_so_no_mention_is_cut() -> None:
    owners = ("x" * 1_000, *(f"U0OWNER{i:03d}" for i in range(40)))

    shown = _fields_of(slack_blocks.pipeline_summary(dataclasses.replace(PIPELINE, owners=owners)))[
        "*Owners*"
    ]

    assert shown.endswith("<@U0OWNER006> and 33 more")
    assert_no_unescaped_control(slack_blocks.notice(shown))


@pytest.mark.parametrize("value", ["p-0123456789ab:x", "r-0123456789ab", "p-0123456789ab:14:1", "", "p-XYZ"])
def test_idle_button_values_we_did_not_write_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="not an idle-pipeline button"):
        slack_blocks.read_idle_button(value)


def test_a_removal_keeps_the_mention_in_its_reason_and_escapes_the_rest() -> None:
    text = slack_blocks.pipeline_removed(
        PIPELINE, removed=["its schedule", "its topic a<b>"], reason="deleted by <@U0ALICE> & <!channel>"
    ).text

    assert "was removed (deleted by <@U0ALICE> &amp; &lt;!channel&gt;)" in text
    assert "Removed: its schedule, its topic a&lt;b&gt;." in text


def test_unschedule_and_live_schedule_confirmations_carry_the_request_in_both_buttons() -> None:
    unschedule = slack_blocks.unschedule_confirmation(PIPELINE, value="v", expires_in_s=900)
    live = slack_blocks.live_schedule_confirmation(
        {"source": "orders", "every": "15m", "watermark": "updated_at"},
        live_topic="orders",
        value="w",
        expires_in_s=900,
    )

    assert _buttons_of(unschedule) == {
        slack_blocks.UNSCHEDULE_CONFIRM_ACTION: "v",
        slack_blocks.UNSCHEDULE_KEEP_ACTION: "v",
    }
    assert _buttons_of(live) == {
        slack_blocks.SCHEDULE_LIVE_CONFIRM_ACTION: "w",
        slack_blocks.SCHEDULE_LIVE_CANCEL_ACTION: "w",
    }
    assert "*live* topic `orders` on every run (`every=15m`)" in live.text


maybe_time = st.one_of(st.none(), st.datetimes(timezones=st.just(UTC)))
pipeline_views = st.builds(
    slack_blocks.PipelineView,
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


def _as_api(view: slack_blocks.PipelineView) -> dict[str, Any]:
    def iso(moment: datetime | None) -> str | None:
        return moment.isoformat() if moment else None

    return {
        "id": view.pipeline_id,
        "source": view.source,
        "schedule": view.schedule,
        "state": view.state,
        "watermark_column": view.watermark_column,
        "watermark": view.watermark,
        "tps": view.tps,
        "topic": view.topic,
        "owners": list(view.owners),
        "next_run_at": iso(view.next_run_at),
        "last_published_at": iso(view.last_published_at),
        "created_at": iso(view.created_at),
        "deadline": iso(view.next_run_at),
        "runs": [],
    }


def _button_limits(message: Message) -> None:
    for block in message.blocks:
        for element in block.get("elements", []) if block["type"] == "actions" else []:
            assert len(element["value"]) <= 2000 and len(element["text"]["text"]) <= 75


@given(
    pipeline_views, st.one_of(st.none(), st.from_regex(r"U[A-Z0-9]{8}", fullmatch=True), any_text), any_text
)
def test_every_pipeline_message_fits_slacks_limits_and_escapes_its_input(
    view: slack_blocks.PipelineView, owner: str | None, reason: str
) -> None:
    messages = [
        slack_blocks.pipeline_summary(view),
        slack_blocks.pipeline_scheduled_reply(view, announced=True),
        slack_blocks.pipeline_changed(view, "resume"),
        slack_blocks.pipeline_detail(_as_api(view)),
        slack_blocks.pipeline_list([_as_api(view)] * 20, "idle"),
        slack_blocks.unschedule_confirmation(view, value="v", expires_in_s=900),
        slack_blocks.idle_prompt(view, idle_since=T_IDLE, deadline=T_IDLE, keep_days=365, owner=owner),
        slack_blocks.pipeline_removed(view, removed=[reason, view.topic], reason=reason, owner=owner),
        slack_blocks.deleted(view),
    ]
    for message in messages:
        assert_within_slack_limits(message)
        assert_no_unescaped_control(message)
        _button_limits(message)


@given(run_views, st.from_regex(r"p-[0-9a-f]{12}", fullmatch=True))
def test_every_pipeline_run_line_fits_and_escapes(run: RunView, pipeline_id: str) -> None:
    message = slack_blocks.pipeline_run_line(dataclasses.replace(run, pipeline_id=pipeline_id))

    assert_within_slack_limits(message)
    assert_no_unescaped_control(message)
