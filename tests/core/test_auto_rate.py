"""``tps=auto``: the controller never leaves [floor, ceiling], backs off above the lag limit, probes up
below it, and in a simulated run whose consumer slows down it keeps the lag bounded and finishes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.core.auto_rate import HOLD_S, AutoRate, Decision, decide

AUTOS = st.builds(
    AutoRate,
    ceiling=st.integers(1, 1_000_000),
    lag_limit=st.integers(1, 10_000_000),
    group=st.just("orders-consumer"),
)


@given(
    auto=AUTOS,
    current=st.integers(1, 1_000_000),
    lag=st.integers(0, 100_000_000),
    drain=st.one_of(st.none(), st.floats(0, 2_000_000)),
    since=st.floats(0, 600),
)
def test_a_decision_stays_within_floor_and_ceiling_and_moves_the_right_way(
    auto: AutoRate, current: int, lag: int, drain: float | None, since: float
) -> None:
    decision = decide(auto, current_tps=current, lag=lag, drain_per_s=drain, since_last_change_s=since)
    if decision is None:
        return
    assert since >= HOLD_S
    assert auto.floor <= decision.tps <= auto.ceiling
    assert decision.tps != current and decision.reason
    if lag > auto.lag_limit and current >= auto.floor:
        assert decision.tps < current  # over the limit: only ever slower
    if lag <= auto.lag_limit // 2 and current <= auto.ceiling:
        assert decision.tps > current  # well under it: only ever faster


def test_nothing_changes_before_the_last_change_had_time_to_show() -> None:
    auto = AutoRate(ceiling=10_000, lag_limit=1_000, group="g")
    assert decide(auto, current_tps=5_000, lag=50_000, drain_per_s=100.0, since_last_change_s=1.0) is None
    late = decide(auto, current_tps=5_000, lag=50_000, drain_per_s=100.0, since_last_change_s=HOLD_S)
    assert late == Decision(tps=100, reason="lag 50,000 > 1,000: below what g consumes (100/s)")


def simulate(
    auto: AutoRate, rows: int, capacity: list[tuple[float, float]], *, until_s: float, sample_s: float = 2.0
) -> tuple[list[tuple[float, int, float]], float]:
    """A fluid model: the replay sends at its rate, the group consumes at most its capacity (which
    changes at the given times), lag is what is sent and not consumed. Returns (time, rate, lag)
    samples and the time the last row was consumed."""
    rate, sent, consumed, now, last_change = auto.start, 0.0, 0.0, 0.0, -HOLD_S
    previous_consumed = 0.0
    history: list[tuple[float, int, float]] = []
    step = 0.25
    while consumed < rows and now < until_s:
        cap = [c for at, c in capacity if at <= now][-1]
        send = min(rate * step, rows - sent)
        sent += send
        consumed += min(cap * step, sent - consumed)
        now += step
        if abs(now / sample_s - round(now / sample_s)) < 1e-6:
            drain = (consumed - previous_consumed) / sample_s
            previous_consumed = consumed
            lag = int(sent - consumed)
            history.append((now, rate, lag))
            decision = decide(
                auto, current_tps=rate, lag=lag, drain_per_s=drain, since_last_change_s=now - last_change
            )
            if decision is not None:
                rate, last_change = decision.tps, now
    return history, now


@settings(max_examples=25, deadline=None)
@given(
    ceiling=st.integers(500, 20_000),
    fast=st.floats(0.3, 3.0),
    slow=st.floats(0.05, 0.5),
    slow_at=st.floats(20, 120),
)
def test_a_consumer_that_slows_down_mid_run_keeps_a_bounded_lag_and_the_run_finishes(
    ceiling: int, fast: float, slow: float, slow_at: float
) -> None:
    """The group consumes ``fast`` x the ceiling, then ``slow`` x the ceiling from ``slow_at`` s on."""
    limit = ceiling * 5  # five seconds of the ceiling
    auto = AutoRate(ceiling=ceiling, lag_limit=limit, group="g")
    rows = ceiling * 60
    # a run that keeps up with the slow consumer finishes in about the time it needs to consume the rows
    until = slow_at + rows / (slow * ceiling) * 2 + 120
    history, finished = simulate(
        auto, rows, [(0.0, fast * ceiling), (slow_at, slow * ceiling)], until_s=until
    )
    assert finished < until, "the run never finished"
    assert all(rate <= ceiling for _, rate, _ in history)
    # the lag a sample can show: the limit, plus what one decision period at the ceiling adds
    bound = limit + ceiling * (HOLD_S + 2.0) * 2
    assert max(lag for _, _, lag in history) <= bound, history
    # Once the lag passes its limit after the slowdown, the rate comes down to the consumer's pace (not
    # "stays there": as the last rows drain the lag falls and the rate rightly climbs again;
    # ceiling=500 fast=0.59 slow=0.0625 slow_at=99 sat at 31/s from 114 s to 148 s, then climbed).
    after = [(rate, lag) for at, rate, lag in history if at > slow_at]
    if any(lag > limit for _, lag in after):
        assert min(rate for rate, _ in after) <= slow * ceiling * 1.3 + auto.floor
