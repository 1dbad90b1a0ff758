"""`daemon.slack` renders runs purely: examples of what people read, properties that hold for any input
(Slack's size limits, escaping of whatever a user or a job wrote), and which row count a run shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.cli.main import describe_run
from daemon.contract.models import ReconcileOut, RunOut
from daemon.core.run_options import RunOptions, WindowKind
from daemon.slack import blocks, run_messages
from daemon.slack.page_messages import PAGE_LINK_ACTION
from daemon.slack.run_report import report_line, rerun_command
from daemon.usecases.wire import run_out
from store.models import Run
from tests.fixtures.slack import CREATED, changed, wire_plan
from tests.fixtures.slack_messages import (
    API_RUN,
    RUN,
    any_text,
    assert_no_unescaped_control,
    assert_within_slack_limits,
    run_views,
)

PLAN = wire_plan(topic="orders", topic_mode="live")


# --- examples ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "n/a"), (0.4, "0.4s"), (42, "42s"), (200, "3m 20s"), (7_500, "2h 05m"), (90_000, "1d 1h")],
)
def test_durations_read_at_a_glance(seconds: float | None, shown: str) -> None:
    assert blocks.human_duration(seconds) == shown


def test_the_parent_names_source_window_rows_topic_rate_eta_and_requester() -> None:
    message = run_messages.run_parent(RUN)

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


def test_a_ramped_run_says_its_ramp_in_its_card_its_plan_and_its_retry() -> None:
    ramped = changed(RUN, ramp_s=300)

    [rate] = [f["text"] for f in run_messages.run_parent(ramped).blocks[1]["fields"] if "*Rate*" in f["text"]]
    planned = repr(run_messages.plan_summary(wire_plan(tps=2_000, ramp_s=90)).blocks)

    assert rate == "*Rate*\n10,000/s after a 5m ramp from 1,000/s"
    assert "2,000/s after a 90s ramp from 200/s on 2 workers" in planned
    assert rerun_command(ramped).endswith(" ramp=5m")


def test_a_shaped_replay_says_its_timeline_on_the_card_its_shape_in_the_plan_and_its_retry() -> None:
    shaped = changed(RUN, speed=60.0, tps=2_000)

    [rate] = [f["text"] for f in run_messages.run_parent(shaped).blocks[1]["fields"] if "*Rate*" in f["text"]]
    planned = repr(
        run_messages.plan_summary(wire_plan(tps=500, speed=60.0, peak_tps=812.4, slid_s=42.0)).blocks
    )
    calm = repr(run_messages.plan_summary(wire_plan(tps=500, speed=0.5, peak_tps=12.0, slid_s=0.0)).blocks)

    assert rate == "*Rate*\nthe original timeline at 60x, at most 2,000/s"
    assert (
        "Shape: its own times at 60x: busiest second 812/s; max=500/s slides the last event 42s later"
        in planned
    )
    assert "its own times at 0.5x: busiest second 12/s; never above max=500/s" in calm
    assert " tps=original speed=60x max=2000" in rerun_command(shaped)
    assert "max=2,000/s slid the last event 42s later" in report_line(changed(shaped, slid_s=42.0))
    assert "never above max=2,000/s" in report_line(changed(shaped, slid_s=0.0))
    assert "slide under max=: not measured" in report_line(shaped)


def test_a_transactional_run_says_so_on_the_card_and_how_its_transactions_went_in_the_report() -> None:
    sent = changed(
        RUN, delivery="transactional", state="succeeded", transactions=42, longest_transaction_s=1.04
    )

    parent = run_messages.run_parent(sent)
    [topic] = [f["text"] for f in parent.blocks[1]["fields"] if "*Target topic*" in f["text"]]

    assert topic.endswith(" · transactional")
    assert "isolation.level=read_committed" in str(parent.blocks)
    assert "42 transactions, the longest open 1.0s" in report_line(sent)
    assert "retries resumed after 250 committed rows" in report_line(changed(sent, resumed=250))
    assert "transactions: not measured" in report_line(changed(sent, transactions=None))
    assert "transaction" not in report_line(changed(RUN, state="succeeded"))
    assert "read_committed" not in str(run_messages.run_parent(RUN).blocks)


def test_a_run_on_another_kafka_cluster_names_it_beside_its_topic() -> None:
    def topic_field(run: RunOut) -> str:
        [topic] = [
            f["text"]
            for f in run_messages.run_parent(run).blocks[1]["fields"]
            if "*Target topic*" in f["text"]
        ]
        return str(topic)

    assert topic_field(changed(RUN, cluster="eu")).endswith(f"`{RUN.topic}` on `eu`")
    assert topic_field(RUN).endswith(f"`{RUN.topic}`")


def test_a_byte_ceiling_is_said_on_the_card_and_its_hold_in_the_report() -> None:
    capped = changed(RUN, max_mb=5, state="succeeded", bytes_held_s=12.0)

    [rate] = [f["text"] for f in run_messages.run_parent(capped).blocks[1]["fields"] if "*Rate*" in f["text"]]

    assert rate == "*Rate*\n10,000/s, at most 5 MB/s"
    assert "max_mb=5 held events back 12s" in report_line(capped)
    assert "max_mb=5 never held events back" in report_line(changed(capped, bytes_held_s=0.1))
    assert "max_mb=5 held events: not measured" in report_line(changed(capped, bytes_held_s=None))
    assert "max_mb" not in report_line(RUN)
    assert rerun_command(capped).endswith(" max_mb=5")


def test_a_run_of_a_table_with_snapshots_names_the_one_it_reads_in_its_card_and_plan() -> None:
    pinned = changed(RUN, snapshot="8655821210307430332")

    [source] = [
        f["text"] for f in run_messages.run_parent(pinned).blocks[1]["fields"] if "*Source*" in f["text"]
    ]
    planned = repr(run_messages.plan_summary(wire_plan(snapshot="3")).blocks)

    assert source == "*Source*\norders at snapshot `8655821210307430332`"
    assert "orders at snapshot `3`" in planned


def test_a_run_that_read_a_snapshot_says_which_in_its_report_and_cli_line_and_its_retry_reads_it() -> None:
    pinned = changed(RUN, state="succeeded", snapshot="8655821210307430332")
    line = "It read orders at snapshot `8655821210307430332`; later commits are not in it."

    assert line in run_messages.final_reply(pinned).text.splitlines()
    assert line in run_messages.final_reply(changed(pinned, state="failed")).text.splitlines()
    assert line in repr(run_messages.run_status(pinned).blocks)
    assert describe_run(pinned).startswith(f"{RUN.id} succeeded: orders@8655821210307430332 ")
    assert rerun_command(pinned).endswith(" tps=10000 snapshot=8655821210307430332"), "a retry reads it again"
    assert "snapshot" not in run_messages.final_reply(changed(pinned, snapshot=None)).text
    listed = changed(pinned, snapshot=None, listed_files=14)
    assert "It read orders as its plan listed it (14 files); files written since are not in it." in (
        run_messages.final_reply(listed).text.splitlines()
    )
    [source] = [
        f["text"] for f in run_messages.run_parent(listed).blocks[1]["fields"] if "*Source*" in f["text"]
    ]
    assert source == "*Source*\norders as its plan listed it (14 files)"
    assert "@" not in describe_run(changed(pinned, snapshot=None)).split(" ")[2]


def test_a_filtered_run_says_its_filter_on_its_card_its_plan_and_its_retry() -> None:
    where = "status IN ('paid', 'shipped') AND amount > 100"
    filtered = changed(RUN, where=where)

    [window] = [
        f["text"] for f in run_messages.run_parent(filtered).blocks[1]["fields"] if "*Window*" in f["text"]
    ]
    planned = repr(run_messages.plan_summary(wire_plan(where=where)).blocks)

    shown_where = where.replace(">", "&gt;")  # Slack's escaping
    assert window.endswith(f", where `{shown_where}`")
    assert f", where `{shown_where}`" in planned
    assert rerun_command(filtered).endswith(f" where={where}")  # last: a filter runs to the end
    long = changed(RUN, where="merchant IN (" + ", ".join(f"'m-{n}'" for n in range(400)) + ")")
    [shown] = [
        f["text"] for f in run_messages.run_parent(long).blocks[1]["fields"] if "*Window*" in f["text"]
    ]
    assert len(shown) < 400 and shown.endswith("…`")
    assert "where" not in repr(run_messages.run_parent(RUN).blocks)


def test_an_erasure_list_is_said_in_the_plan_and_what_it_left_out_in_the_report() -> None:
    as_of = datetime(2024, 5, 2, 9, 30, tzinfo=UTC)
    planned = repr(
        run_messages.plan_summary(
            wire_plan(erasures="s3://l/e.csv", erased_keys=2, erasures_as_of=as_of)
        ).blocks
    )
    assert "less the events of 2 erased keys (erasure list as of 2024-05-02 09:30" in planned
    honoured = changed(RUN, state="succeeded", erasures="s3://l/e.csv", suppressed=7, erasures_as_of=as_of)
    assert "suppressed 7 (erasure list as of 2024-05-02T09:30:00Z)" in report_line(honoured)
    assert "erasures: not measured" in report_line(changed(honoured, suppressed=None))
    assert "erasure" not in report_line(RUN)


def test_a_repair_says_which_run_it_completes_while_it_runs_and_after() -> None:
    repair = changed(RUN, repair_of="r-0123456789ab")
    for run in (repair, changed(repair, state="succeeded")):
        assert "Repairs `r-0123456789ab`: only the ids its reconcile found missing." in repr(
            run_messages.run_parent(run).blocks
        )
    assert "Repairs" not in repr(run_messages.run_parent(RUN).blocks)
    verdict = ReconcileOut(
        at=CREATED,
        selected=9,
        found=9,
        missing=0,
        unexpected=0,
        duplicates=0,
        on_demand=True,
        repaired_by="r-1",
    )
    repaired = changed(RUN, state="succeeded", reconcile=verdict)
    assert "Repaired by `r-1`." in repr(run_messages.run_parent(repaired).blocks)
    assert "after repair `r-1`" in run_messages.reconcile_reply(repaired).text


def test_the_final_parent_shows_the_confirmed_count_rate_and_duration() -> None:
    final = changed(
        RUN,
        state="succeeded",
        rows_selected=2_100_000,
        confirmed=2_100_000,
        achieved_tps=9_990.4,
        started_at=CREATED,
        ended_at=CREATED + timedelta(seconds=211),
    )

    shown = repr(run_messages.run_parent(final).blocks)

    assert "2,100,000 (of 2,100,000 selected)" in shown
    assert "9,990/s" in shown
    assert "3m 31s" in shown
    assert "Final report in the thread" in shown


def test_progress_shows_share_rate_and_time_left() -> None:
    message = run_messages.progress_reply(changed(RUN, confirmed=700_000), rate_now=9_800.0)

    assert message.text == (
        ":hourglass_flowing_sand: *700,000* of 2,100,000 confirmed (33%) · 9,800/s · about 2m 23s left"
    )


def test_progress_says_when_its_numbers_were_read() -> None:
    read = datetime(2024, 5, 1, 10, 4, 5, tzinfo=UTC)
    message = run_messages.progress_reply(changed(RUN, confirmed=700_000), rate_now=9_800.0, as_of=read)

    assert message.text.endswith("· about 2m 23s left · updated 10:04:05 UTC")


def test_progress_starts_as_a_starting_line_and_ends_in_the_runs_end_state() -> None:
    starting = run_messages.progress_reply(changed(RUN, state="submitted"))
    ended = run_messages.progress_reply(
        changed(RUN, state="succeeded", rows_selected=2_100_000, confirmed=2_100_000)
    )

    assert starting.text.startswith(":hourglass_flowing_sand: Starting…")
    assert ended.text == (
        ":white_check_mark: *2,100,000* of 2,100,000 confirmed (100%) · succeeded, final report below"
    )


def test_success_gives_the_broker_confirmed_count_to_the_requester() -> None:
    done = changed(
        RUN,
        state="succeeded",
        rows_selected=2_100_000,
        confirmed=2_099_998,
        achieved_tps=9_990.0,
        started_at=CREATED,
        ended_at=CREATED + timedelta(seconds=210.2),
    )

    assert run_messages.final_reply(done).text.startswith(
        ":white_check_mark: *Done,* <@U0ALICE>. "
        "The broker confirmed *2,099,998* events (of 2,100,000 selected)"
    )


@pytest.mark.parametrize(
    ("kind", "reason", "advice"),
    [
        ("launch", "could not launch the job: spark-submit not found", "the job never started"),
        ("launch", "EMR refused the application", "the job never started"),  # the kind says it, not words
        ("job", "the job could not launch its tasks", "/replay status r-0123456789ab"),
        ("lost", "job process lost (last output: ...)", "stopped without reporting a result"),
        ("job", "delivery failed: Broker: Not enough in-sync replicas", "check the cluster"),
        ("job", "something else", "/replay status r-0123456789ab"),
        ("job", "java.lang.OutOfMemoryError: Java heap space", "an executor ran out of memory"),
        (
            "lost",
            "job process lost (last output: Container killed on request. Exit code 137)",
            "ran out of memory",
        ),
        ("lost", "job process lost (last output: Executor exited. Exit code is 137)", "ran out of memory"),
        ("job", "Job aborted: ExecutorLostFailure (executor 2 exited: 143)", "`emr.executor_memory_gb`"),
        ("job", "java.lang.OutOfMemoryError: GC overhead limit exceeded on the driver", "the driver ran out"),
    ],
)
def test_a_failure_gives_the_reason_and_a_next_step(kind: str, reason: str, advice: str) -> None:
    failed = changed(RUN, state="failed", confirmed=5, failure_reason=reason, failure_kind=kind)
    text = run_messages.final_reply(failed).text

    assert f"*Reason:* {reason}" in text
    assert advice in text
    assert "host restart" not in text


def test_out_of_memory_names_the_memory_settings_to_raise() -> None:
    step = run_messages.next_step(changed(RUN, state="failed", failure_reason="Java heap space"))

    for setting in ("emr.executor_memory_gb", "spark.executor.memory", "workers="):
        assert setting in step


def test_a_cancelled_run_suggests_the_command_to_start_again() -> None:
    text = run_messages.final_reply(changed(RUN, state="cancelled", confirmed=42)).text

    assert "*42* of 2,100,000 events were confirmed before it stopped" in text
    assert "`/replay orders 2024-01-01..2024-01-07 tps=10000`" in text


def test_an_input_error_names_the_token_why_and_usage() -> None:
    message = blocks.input_error("tps=abc", "'abc' is not a number", "/replay <source> <window>")

    assert message.text == (
        ":warning: `tps=abc`: 'abc' is not a number\n*Usage:* `/replay &lt;source&gt; &lt;window&gt;`"
    )


def test_a_token_with_a_backtick_is_quoted_instead_of_breaking_the_code_span() -> None:
    assert blocks.code("a`b") == "“a`b”"


def test_a_run_derives_its_duration_and_its_expected_duration() -> None:
    assert (API_RUN.duration_s, API_RUN.duration_estimate_s) == (6.5, 6.0)  # no plan estimate: 600 / 100/s
    assert changed(API_RUN, eta_s=26.0).duration_estimate_s == 26.0  # the plan's, start-up included


def test_plan_summary_and_live_confirmation() -> None:
    plan = run_messages.plan_summary(PLAN)
    ask = run_messages.live_confirmation(PLAN, value="v", expires_in_s=900)

    assert plan.text == "Plan: 600 rows of orders 2024-01-01..2024-01-02 → orders at 100/s, about 6.0s"
    buttons = ask.blocks[-1]["elements"]
    assert [(b["action_id"], b["value"]) for b in buttons] == [
        (run_messages.CONFIRM_ACTION, "v"),
        (run_messages.CANCEL_ACTION, "v"),
    ]
    assert "Confirm within 15m 00s" in ask.text


def test_a_plan_that_waits_for_a_slot_says_so_first() -> None:
    waits = PLAN.model_copy(
        update={"eta_s": 96.0, "eta_startup_s": 20.0, "eta_publish_s": 6.0, "eta_finish_s": 3.0}
    )
    alone = run_messages.eta_split(waits)
    queued = run_messages.eta_split(waits.model_copy(update={"eta_queue_s": 67.0, "runs_ahead": 2}))

    assert "waiting" not in alone
    assert queued.startswith("about 1m 36s: ~1m 07s waiting for 2 runs ahead, ~20s to start")


def test_a_plan_says_whether_it_would_start_warm_when_the_launcher_can_tell() -> None:
    timed = PLAN.model_copy(update={"eta_s": 10.0, "eta_startup_s": 4.0, "eta_publish_s": 6.0})

    assert "~4.0s to start (warm)," in run_messages.eta_split(timed.model_copy(update={"warm": True}))
    assert "~4.0s to start (cold)," in run_messages.eta_split(timed.model_copy(update={"warm": False}))
    assert "~4.0s to start," in run_messages.eta_split(timed)  # the launcher cannot tell: nothing said


def test_a_button_value_over_slacks_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="2000"):
        run_messages.live_confirmation(PLAN, value="x" * 2001, expires_in_s=900)


def test_long_run_lists_are_cut_with_a_count_of_the_rest() -> None:
    message = run_messages.run_list([API_RUN] * 20, "yours")

    assert message.text.count("`r-0123456789ab`") == run_messages.MAX_LISTED_RUNS
    assert message.text.endswith("…and 5 more")


def test_mentions_only_for_slack_user_ids() -> None:
    assert (blocks.mention("U0ALICE"), blocks.mention("alice<!here>")) == (
        "<@U0ALICE>",
        "alice&lt;!here&gt;",
    )


# --- properties -------------------------------------------------------------------------------------


@given(
    run_views,
    st.one_of(st.none(), st.floats(min_value=0, max_value=1e9)),
    st.one_of(st.none(), st.datetimes(timezones=st.just(UTC))),
)
def test_every_thread_message_fits_slacks_limits_and_escapes_its_input(
    run: RunOut, rate_now: float | None, as_of: datetime | None
) -> None:
    for message in (
        run_messages.run_parent(run),
        run_messages.progress_reply(run, rate_now=rate_now, as_of=as_of),
        run_messages.final_reply(run),
        run_messages.reconcile_reply(run),
    ):
        assert_within_slack_limits(message)
        assert_no_unescaped_control(message)


@given(run_views.filter(lambda r: r.state in ("failed", "cancelled")))
def test_a_run_that_did_not_succeed_always_gets_a_next_step(run: RunOut) -> None:
    assert "*Next step:* " in run_messages.final_reply(run).text


@given(st.text(min_size=1, max_size=300).filter(lambda t: "`" not in t and t.strip()), any_text, any_text)
def test_an_input_error_always_shows_the_token(token: str, reason: str, usage: str) -> None:
    message = blocks.input_error(token, reason, usage)

    assert f"`{blocks.escape(blocks.clip(token, blocks.MAX_TOKEN_SHOWN))}`" in message.text
    assert_within_slack_limits(message)
    assert_no_unescaped_control(message)


@given(any_text)
def test_refusals_and_outages_escape_the_message(text: str) -> None:
    for message in (blocks.refusal(text, "/replay <source>"), blocks.unavailable(text)):
        assert_within_slack_limits(message)
        assert_no_unescaped_control(message)


def test_progress_before_a_rate_is_known_shows_the_target_rate() -> None:
    message = run_messages.progress_reply(changed(RUN, confirmed=10_000), rate_now=0.0)

    assert "· target 10,000/s · about 3m 29s left" in message.text


# --- which row count a run shows ------------------------------------------------------------------------


def _row(**changes: object) -> Run:
    """A run row as the store hands it over (detached: no database needed)."""
    fields: dict[str, object] = {
        "id": "r-0123456789ab",
        "kind": "replay",
        "source": "orders",
        "window_label": "2024-01-01..2024-01-02",
        "topic": "replay.orders.r-0123456789ab",
        "tps": 100,
        "requester": "U0ALICE",
        "state": "succeeded",
        "options": RunOptions(window=WindowKind.DAYS, planned_rows=600),
        "rows_selected": 598,
        "confirmed": 597,
        "failed_tasks": 0,
        "duplicates": 0,
        "created_at": CREATED,
        "started_at": CREATED,
        "ended_at": CREATED + timedelta(seconds=6),
    }
    return Run(**{**fields, **changes})


def test_the_jobs_own_count_wins_over_the_plan_and_the_final_count_is_the_brokers() -> None:
    wire = run_out(_row())
    view = wire

    assert (wire.rows_planned, wire.rows_selected, wire.confirmed) == (600, 598, 597)
    assert (view.rows, view.confirmed) == (598, 597)
    assert "The broker confirmed *597* events (of 598 selected)" in run_messages.final_reply(view).text
    shown = {
        f["text"].split("\n")[0]: f["text"].split("\n")[1]
        for f in run_messages.run_parent(view).blocks[1]["fields"]
    }
    assert (shown["*Rows*"], shown["*Confirmed by the broker*"]) == ("598", "597 (of 598 selected)")


def test_before_the_job_reports_the_plans_count_is_shown_and_named_as_planned() -> None:
    view = run_out(_row(state="cancelled", rows_selected=None, confirmed=20))

    assert view.rows == 600
    assert "*20* of 600 events were confirmed" in run_messages.final_reply(view).text
    assert "20 (of 600 planned)" in repr(run_messages.run_parent(view).blocks)


def test_an_unknown_row_count_is_shown_as_unknown_never_as_zero() -> None:
    pipeline_run = _row(
        kind="pipeline",
        state="running",
        options=RunOptions(window=WindowKind.WATERMARK),
        rows_selected=None,
        confirmed=0,
        ended_at=None,
    )
    view = run_out(pipeline_run)

    assert (view.rows, view.duration_estimate_s) == (None, None)
    parent = repr(run_messages.run_parent(view).blocks)
    assert "*Rows*\\nunknown" in parent and "*ETA*\\nn/a" in parent
    assert run_messages.progress_reply(changed(view, confirmed=5)).text.startswith(
        ":hourglass_flowing_sand: *5* confirmed ·"
    )
    assert "0/unknown" in run_messages.run_line(run_out(pipeline_run))


def test_the_card_links_to_the_runs_page_and_has_a_button_for_a_link_of_ones_own() -> None:
    blocks = run_messages.run_parent(RUN, page_url=f"http://replay.example/runs/{RUN.id}").blocks

    assert f"<http://replay.example/runs/{RUN.id}|Its page>" in str(blocks)
    [button] = blocks[-1]["elements"]
    assert (button["action_id"], button["value"]) == (PAGE_LINK_ACTION, RUN.id)
    assert "url" not in button  # the channel sees the card: the link is sent to each clicker alone
    plain = run_messages.run_parent(RUN).blocks
    assert "Its page" not in str(plain) and PAGE_LINK_ACTION not in str(plain)
