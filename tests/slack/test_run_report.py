"""The honest part of a run's messages: counts nobody measured say so, a failed run says what is on the
topic anyway, the reconcile verdict shows sample ids, and `/replay status` of a failed run gives a retry
command that replays the same window the run read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from daemon.contract.models import ReconcileOut, RunOut
from daemon.core.windows import TimeWindow, parse_window
from daemon.slack import run_messages, run_report
from tests.fixtures.slack import CREATED, changed, wire_run

RUN = wire_run(
    window="2024-01-01..2024-01-07",
    tps=2_000,
    state="succeeded",
    rows_planned=10_500,
    rows_selected=10_500,
    confirmed=10_500,
    achieved_tps=1_996.3,
    started_at=CREATED,
    ended_at=CREATED + timedelta(seconds=39),
    duplicates=None,  # not measured
)
CLEAN = ReconcileOut(at=CREATED, selected=10_500, found=10_500, missing=0, unexpected=0, duplicates=0)


def _reconcile(**changes: object) -> ReconcileOut:
    return ReconcileOut.model_validate({**CLEAN.model_dump(), **changes})


def _failed(**changes: object) -> RunOut:
    """A `last=6h` run that failed after publishing had started."""
    fields: dict[str, object] = {
        "state": "failed",
        "window": "last=6h",
        "window_relative": True,
        "window_start": datetime(2024, 1, 1, tzinfo=UTC),
        "window_end": datetime(2024, 1, 1, 6, tzinfo=UTC),
        "confirmed": 4_000,
        "on_topic_at_least": 4_650,
        "dead_lettered": 2,
        "dlq_topic": "replay.dlq.orders",
        "failure_reason": "delivery failed: Broker: Request timed out",
        "started_at": CREATED,
        "ended_at": CREATED + timedelta(seconds=30),
    }
    return wire_run(**{**fields, **changes})


# --- the final report ---------------------------------------------------------------------------------


def test_a_measured_run_reports_every_count_it_measured() -> None:
    run = changed(
        RUN,
        dead_lettered=3,
        dlq_topic="replay.dlq.orders",
        duplicates=2,
        failed_tasks=1,
        partition_skew=1.84,
        behind_schedule_s=12.4,
        reconcile=CLEAN,
    )

    text = run_messages.final_reply(run).text

    assert (
        "*Report:* dead-lettered 3 · duplicates 2 · failed task attempts 1 · partition skew 1.8x · "
        "12s behind schedule"
    ) in text
    assert ":white_check_mark: *Reconcile:* clean: every one of 10,500 event ids exactly once" in text


def test_counts_nobody_measured_say_not_measured_never_zero() -> None:
    text = run_messages.final_reply(RUN).text

    assert "duplicates not measured" in text
    assert "partition skew not measured" in text
    assert "behind schedule: not measured" in text
    assert "no dead-letter topic" in text
    assert "duplicates 0" not in text
    assert ":grey_question: *Reconcile:* not reconciled" in text
    assert "`/replay reconcile r-0123456789ab`" in text


def test_the_achieved_rate_says_which_span_it_divides_by() -> None:
    text = run_messages.final_reply(RUN).text

    assert (
        "Achieved 1,996/s between the first and the last confirmed delivery (asked 2,000/s); "
        "the run took 39s, start-up included."
    ) in text


def test_a_failed_run_says_what_is_on_the_topic_at_least() -> None:
    text = run_messages.final_reply(_failed()).text

    assert (
        ":x: *Failed,* <@U0ALICE>, after *4,000* of 600 events were confirmed by its finished tasks." in text
    )
    assert "At least *4,650* are on the topic `replay.orders.r-0123456789ab`" in text
    assert "0 are on the topic" not in text


def test_a_failed_run_that_could_not_count_says_unknown_and_how_to_count() -> None:
    text = run_messages.final_reply(_failed(on_topic_at_least=None)).text

    assert "How many of its records reached `replay.orders.r-0123456789ab` is unknown" in text
    assert "`/replay reconcile r-0123456789ab` counts them" in text


def test_the_verdict_shows_up_to_ten_sample_ids_per_category_escaped() -> None:
    missing = [f"e-{n}" for n in range(10)]
    reconcile = _reconcile(
        found=10_499,
        missing=10,
        duplicates=1,
        missing_sample=missing,
        duplicates_sample=["<!here>"],
        missing_dead_lettered=0,
    )

    lines = run_report.verdict_lines("r-0123456789ab", reconcile)

    assert lines[0].startswith(":warning: *Reconcile:* missing: 10 missing, 1 duplicate")
    assert lines[1] == "missing: " + ", ".join(f"`e-{n}`" for n in range(10))
    assert lines[2] == "duplicated: `&lt;!here&gt;`"


def test_missing_ids_all_on_the_dead_letter_topic_are_explained() -> None:
    reconcile = _reconcile(found=10_498, missing=2, missing_sample=["e-7", "e-9"], missing_dead_lettered=2)

    [verdict, sample] = run_report.verdict_lines("r-0123456789ab", reconcile)

    assert verdict.startswith(":information_source: *Reconcile:* explained: 2 missing (2 on the dead-letter")
    assert sample == "missing: `e-7`, `e-9`"


def test_a_reconcile_that_could_not_run_is_not_measured() -> None:
    reconcile = _reconcile(
        selected=None, found=None, missing=None, unexpected=None, duplicates=None, error="down"
    )

    assert run_report.verdict_lines("r-0123456789ab", reconcile)[0] == (
        ":grey_question: *Reconcile:* not reconciled: down"
    )


def test_an_on_demand_reconcile_replies_with_its_time_and_verdict() -> None:
    reconcile = _reconcile(
        unexpected=1, unexpected_sample=["e-x"], at=datetime(2024, 5, 2, 8, 30, tzinfo=UTC)
    )

    text = run_messages.reconcile_reply(changed(RUN, reconcile=reconcile)).text

    assert text.startswith(
        ":mag: *Reconcile of `r-0123456789ab`* (2024-05-02 08:30 UTC), asked after the run:"
    )
    assert "*Reconcile:* unexpected: 1 unexpected" in text
    assert "unexpected: `e-x`" in text


def test_the_final_parent_carries_the_verdict() -> None:
    footer = run_messages.run_parent(changed(RUN, reconcile=CLEAN)).blocks[-1]

    assert "Reconcile: clean: every one of 10,500 event ids exactly once" in repr(footer)


# --- /replay status of a failed run -------------------------------------------------------------------


def test_status_of_a_failed_run_gives_reason_counts_and_a_retry_of_the_same_window() -> None:
    text = repr(run_messages.run_status(_failed()).blocks)

    assert "*Reason:* delivery failed: Broker: Request timed out" in text
    assert "At least *4,650* are on the topic" in text
    assert "dead-lettered 2" in text and "(dlq=2)" in text
    assert "`/replay orders 2024-01-01T00:00Z..2024-01-01T06:00Z tps=100`" in text
    assert "last=6h tps" not in text


def test_status_of_a_running_run_is_its_card() -> None:
    running = wire_run()

    assert run_messages.run_status(running) == run_messages.run_parent(running)


def test_the_card_of_a_relative_window_shows_the_bounds_it_read() -> None:
    fields = repr(run_messages.run_parent(_failed()).blocks[1])

    assert "*Window*\\n`last=6h` = `2024-01-01T00:00Z..2024-01-01T06:00Z`" in fields


def test_a_retry_command_keeps_a_fixed_window_as_typed() -> None:
    assert run_report.rerun_command(RUN) == "/replay orders 2024-01-01..2024-01-07 tps=2000"


def test_a_retry_command_follows_the_recorded_facts_not_the_label_or_the_topic_name() -> None:
    # a live topic whose name starts like the platform's own, and a label that looks relative
    live = changed(RUN, topic="replay.orders.live", topic_mode="live", window="last=6h")
    assert run_report.rerun_command(live) == "/replay orders last=6h tps=2000 topic=live"


@given(
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9000, 1, 1), timezones=st.just(UTC)),
    st.timedeltas(min_value=timedelta(seconds=1), max_value=timedelta(days=3_000)),
)
def test_a_pinned_window_parses_back_to_the_bounds_the_run_read(start: datetime, span: timedelta) -> None:
    view = changed(RUN, window="last=6h", window_relative=True, window_start=start, window_end=start + span)

    pinned = run_report.pinned_window(view)

    assert parse_window(pinned) == TimeWindow(start, start + span)


# --- where the thread is ------------------------------------------------------------------------------


def test_a_thread_moved_to_a_dm_says_which_channel_refused_and_why() -> None:
    moved = changed(RUN, state="submitted", slack_channel="D0ALICE")

    first = repr(run_messages.run_parent(moved, redirected=("C0SECRET", "not_in_channel")).blocks)
    later = repr(run_messages.run_parent(moved).blocks)

    assert "I could not post in <#C0SECRET> (Slack said `not_in_channel`)" in first
    assert "This run's thread is in your direct messages with me." in later


def test_the_acknowledgement_says_when_progress_goes_to_a_dm() -> None:
    text = run_messages.accepted(wire_run(state="queued"), created=True, unreachable="is_archived").text

    assert (
        "I cannot post in this channel (Slack says `is_archived`), so progress follows in your direct" in text
    )
