"""The drain watch's pure parts: the "caught up?" verdict, one step after the run, the stored form, the
grammar of `watch=`, and what Slack and the CLI show."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.cli.drains import drain_line
from daemon.contract.models import GroupDrainOut, ReplayBody, ScheduleBody
from daemon.core.drain import (
    BASELINE_UNKNOWN,
    MAX_WATCHED_GROUPS,
    DrainStage,
    GroupDrain,
    advance,
    baseline_of,
    caught_up,
    groups_from,
    skipped,
    tolerance,
)
from daemon.core.grammar import GrammarError, ReplayCommand, ScheduleCommand, parse
from daemon.core.lag import OffsetSample, PartitionOffsets
from daemon.core.windows import RelativeWindow
from daemon.slack.drain_messages import drain_message, drain_outcome, group_line
from tests.fixtures.slack import wire_run

TOPIC = "orders"
END = 1_700_000_000.0  # the run's end
DEADLINE = END + 1800


def _sample(at: float, *parts: tuple[int | None, int]) -> OffsetSample:
    return OffsetSample(at, tuple(PartitionOffsets(TOPIC, p, c, e) for p, (c, e) in enumerate(parts)))


def _step(
    watched: GroupDrain, sample: OffsetSample | None, *, now: float = 0.0, note: str | None = None
) -> GroupDrain:
    now = sample.at if sample is not None else now
    return advance(watched, sample, now=now, ended_at=END, deadline=DEADLINE, interval_s=5.0, note=note)


lags = st.none() | st.integers(min_value=0, max_value=10**9)


@given(lag=lags, baseline=lags, allowance=st.integers(min_value=0, max_value=10**6))
def test_caught_up_means_at_most_the_baseline_plus_the_allowance_and_unknown_never_is(
    lag: int | None, baseline: int | None, allowance: int
) -> None:
    expected = lag is not None and lag <= (baseline or 0) + allowance
    assert caught_up(lag, baseline, allowance) == expected


@given(
    rate=st.none() | st.floats(min_value=-1e6, max_value=1e6), interval=st.floats(min_value=0.1, max_value=60)
)
def test_the_allowance_is_one_interval_of_the_topics_own_producers_never_negative(
    rate: float | None, interval: float
) -> None:
    allowed = tolerance(rate, interval)
    assert allowed >= 0
    if rate is not None and rate > 0:
        assert allowed >= rate * interval


def test_a_group_without_committed_offsets_has_an_unknown_baseline_not_zero() -> None:
    watched = baseline_of("g", _sample(END - 60, (None, 10), (None, 4)))

    assert (watched.state, watched.baseline, watched.note) == (DrainStage.BASELINE, None, BASELINE_UNKNOWN)


def test_the_baseline_is_the_known_lag_before_the_run() -> None:
    assert baseline_of("g", _sample(END - 60, (8, 10), (None, 4))).baseline == 2


def test_lag_above_the_baseline_is_watched_with_its_drain_then_caught_up() -> None:
    start = baseline_of("g", _sample(END - 60, (10, 10), (5, 5)))
    first = _step(start, _sample(END + 1, (10, 310), (5, 305)))  # 600 behind
    second = _step(first, _sample(END + 6, (110, 310), (105, 305)))  # consumed 200 in 5 s, none produced
    third = _step(second, _sample(END + 21, (310, 310), (305, 305)))

    assert (first.state, first.lag, first.drain_per_s) == (DrainStage.WATCHING, 600, None)
    assert (second.state, second.lag, second.drain_per_s) == (DrainStage.WATCHING, 400, 40.0)
    assert second.seconds_to_baseline == 10.0
    assert (third.state, third.lag, third.caught_up_at) == (DrainStage.CAUGHT_UP, 0, END + 21)


def test_a_busy_topic_is_caught_up_within_one_interval_of_its_own_production() -> None:
    start = baseline_of("g", _sample(END - 60, (100, 110)))  # baseline 10
    first = _step(start, _sample(END + 1, (100, 500)))
    second = _step(first, _sample(END + 6, (480, 520)))  # 4/s produced: 20 allowed over 5 s; lag 40

    third = _step(second, _sample(END + 11, (510, 540)))  # lag 30 = baseline 10 + 20 allowed

    assert second.state == DrainStage.WATCHING
    assert (third.state, third.lag) == (DrainStage.CAUGHT_UP, 30)


def test_the_deadline_times_an_unfinished_watch_out_with_its_lag() -> None:
    start = baseline_of("g", _sample(END - 60, (0, 0)))
    late = _step(start, _sample(DEADLINE + 1, (0, 50)))

    assert (late.state, late.lag, late.caught_up_at) == (DrainStage.TIMED_OUT, 50, None)
    assert _step(late, _sample(DEADLINE + 9, (50, 50))) == late  # concluded: it stays as it ended


def test_kafka_not_answering_keeps_watching_with_the_reason_until_the_deadline() -> None:
    start = baseline_of("g", _sample(END - 60, (0, 0)))

    waiting = _step(start, None, now=END + 5, note="Kafka did not answer: down")
    given_up = _step(waiting, None, now=DEADLINE, note="Kafka did not answer: down")

    assert (waiting.state, waiting.note) == (DrainStage.WATCHING, "Kafka did not answer: down")
    assert given_up.state == DrainStage.TIMED_OUT


def test_a_run_that_published_nothing_skips_what_is_unfinished() -> None:
    done = GroupDrain("a", DrainStage.CAUGHT_UP, 0)
    open_ = GroupDrain("b", DrainStage.BASELINE, 3)

    assert [g.state for g in skipped((done, open_))] == [DrainStage.CAUGHT_UP, DrainStage.SKIPPED]


def test_a_watch_round_trips_through_its_stored_form() -> None:
    start = baseline_of("g", _sample(END - 60, (10, 10), (None, 5)))
    watched = _step(
        _step(start, _sample(END + 1, (10, 30), (None, 5))), _sample(END + 6, (20, 30), (None, 5))
    )

    assert groups_from({"groups": [watched.to_dict()]}) == (watched,)
    assert groups_from(None) == ()


def test_watch_is_parsed_in_order_and_its_errors_name_the_token() -> None:
    command = parse("orders last=6h watch=orders-consumer,billing.v2")
    too_many = ",".join(f"g{i}" for i in range(MAX_WATCHED_GROUPS + 1))

    assert command == ReplayCommand(
        "orders", RelativeWindow(6 * 3600), watch=("orders-consumer", "billing.v2")
    )
    for bad, reason in (
        ("watch=a,,b", "empty group entry"),
        ("watch=a,a", "given twice"),
        ("watch=a/b", "not a consumer group id"),
        (f"watch={too_many}", f"at most {MAX_WATCHED_GROUPS}"),
    ):
        with pytest.raises(GrammarError) as refused:
            parse(f"orders last=6h {bad}")
        assert (refused.value.token, reason in refused.value.reason) == (bad, True)


AT = datetime(2024, 5, 1, 12, 3, 4, tzinfo=UTC)


def test_slack_says_when_a_group_caught_up_and_how_long_after_the_last_event() -> None:
    watched = GroupDrainOut(
        group="orders-consumer",
        state=DrainStage.CAUGHT_UP,
        baseline=0,
        lag=0,
        caught_up_at=AT,
        caught_up_after_s=123,
    )
    run = wire_run(state="succeeded", watch=[watched], slack_ts="1.0")

    assert drain_outcome(run, "orders-consumer").text == (
        ":white_check_mark: `orders-consumer` caught up at 12:03:04 UTC, 2 min 3 s after the last event "
        "(lag 0, baseline 0)."
    )


def test_slack_shows_a_draining_group_and_an_unknown_lag_as_unknown() -> None:
    draining = GroupDrainOut(
        group="a", state=DrainStage.WATCHING, baseline=5, lag=1205, drain_per_s=40.0, seconds_to_baseline=30
    )
    unknown = GroupDrainOut(group="b", state=DrainStage.WATCHING, baseline=None, lag=None, note="no offsets")
    run = wire_run(state="succeeded", watch=[draining, unknown], watch_deadline=AT)

    assert group_line(draining) == (
        ":mag: `a`: lag 1,205 (baseline 5); draining 40.0/s, back to baseline in about 30s"
    )
    assert (
        group_line(unknown)
        == ":mag: `b`: lag unknown (baseline unknown); drain not measured yet — no offsets"
    )
    assert "Watched until 12:03:04 UTC" in str(drain_message(run).payload())


def test_slack_says_a_timed_out_watch_with_the_lag_left() -> None:
    watched = GroupDrainOut(group="a", state=DrainStage.TIMED_OUT, baseline=0, lag=77)
    run = wire_run(state="succeeded", watch=[watched])

    assert (
        drain_outcome(run, "a").text == ":hourglass: `a`: the watch timed out with lag 77 left (baseline 0)."
    )


def test_the_cli_line_of_a_caught_up_group() -> None:
    watched = GroupDrainOut(
        group="a", state=DrainStage.CAUGHT_UP, baseline=0, lag=0, caught_up_at=AT, caught_up_after_s=18.2
    )

    assert drain_line(watched) == (
        "watch a: caught_up, lag 0 (baseline 0), caught up at 12:03:04 UTC, 18s after the last event"
    )


def test_watch_goes_over_the_wire_and_back_for_replays_and_schedules() -> None:
    replay = parse("orders last=6h watch=a,b")
    schedule = parse("schedule orders every=1h watermark=updated_at watch=c")
    assert isinstance(replay, ReplayCommand) and isinstance(schedule, ScheduleCommand)

    assert ReplayBody.of(replay).watch == ["a", "b"]
    assert ReplayBody.of(replay).command(ReplayCommand) == replay
    assert ScheduleBody.of(schedule).command() == schedule
