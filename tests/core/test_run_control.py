"""Live control's pure rules over generated runs and actions: what a change appends, what it refuses,
and the rate a run has at any time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.core.errors import BadRequest, Conflict
from daemon.core.run_control import (
    CONTROLLABLE_STATES,
    MAX_CHANGES,
    Action,
    ControlledRun,
    Pause,
    Rate,
    RateChange,
    Resume,
    SetRate,
    apply,
    changes_from,
    latest_rate,
    paused_since,
    rate_at,
)
from daemon.core.states import RunKind, RunState

MAX_TPS = 200_000
LEAD_S = 1.0
NOW = 1_700_000_000.0

rates = st.integers(min_value=1, max_value=MAX_TPS)
actions: st.SearchStrategy[Action] = st.one_of(
    st.builds(SetRate, st.integers(min_value=-5, max_value=MAX_TPS + 5)), st.just(Pause()), st.just(Resume())
)


def _run(
    *, tps: int = 1000, state: RunState = RunState.RUNNING, kind: RunKind = RunKind.REPLAY
) -> ControlledRun:
    return ControlledRun(run_id="r-0123456789ab", kind=kind, state=state, tps=tps)


def _applied(run: ControlledRun, actions: list[Action], now: float = NOW) -> ControlledRun:
    """The run after every accepted action, one second apart; refusals leave it as it was."""
    for step, action in enumerate(actions):
        try:
            change = apply(run, action, now=now + step, lead_s=LEAD_S, max_tps=MAX_TPS)
        except (BadRequest, Conflict):
            continue
        run = ControlledRun(run.run_id, run.kind, run.state, run.tps, (*run.changes, change))
    return run


@settings(max_examples=300)
@given(rates, st.lists(actions, max_size=30))
def test_accepted_changes_stay_in_time_order_within_bounds_and_each_changes_something(
    tps: int, steps: list[Action]
) -> None:
    run = _applied(_run(tps=tps), steps)

    times = [change.at for change in run.changes]
    assert times == sorted(times)
    assert all(1 <= change.tps <= MAX_TPS for change in run.changes)
    before = Rate(tps)
    for change in run.changes:
        after = Rate(change.tps, change.paused)
        assert after != before  # no change repeats the rate it replaces
        before = after


@settings(max_examples=300)
@given(rates, st.lists(actions, max_size=30), actions)
def test_a_change_takes_effect_one_lead_from_now_and_the_rate_before_it_holds_until_then(
    tps: int, steps: list[Action], action: Action
) -> None:
    run = _applied(_run(tps=tps), steps)
    now = NOW + len(steps)
    try:
        change = apply(run, action, now=now, lead_s=LEAD_S, max_tps=MAX_TPS)
    except (BadRequest, Conflict):
        return
    changes = (*run.changes, change)

    assert change.at == now + LEAD_S
    assert rate_at(tps, changes, now + LEAD_S - 0.001) == rate_at(tps, run.changes, now + LEAD_S - 0.001)
    assert rate_at(tps, changes, change.at) == Rate(change.tps, change.paused) == latest_rate(tps, changes)


@settings(max_examples=200)
@given(rates, st.lists(actions, max_size=20))
def test_pause_is_refused_exactly_when_paused_and_resume_exactly_when_not(
    tps: int, steps: list[Action]
) -> None:
    run = _applied(_run(tps=tps), steps)
    paused = latest_rate(tps, run.changes).paused

    for action, refused_when in ((Pause(), True), (Resume(), False)):
        if paused == refused_when:
            with pytest.raises(Conflict, match="already paused" if refused_when else "is not paused"):
                apply(run, action, now=NOW + 100, lead_s=LEAD_S, max_tps=MAX_TPS)
        else:
            apply(run, action, now=NOW + 100, lead_s=LEAD_S, max_tps=MAX_TPS)


@given(rates, st.integers(min_value=-1000, max_value=0) | st.integers(min_value=MAX_TPS + 1, max_value=10**9))
def test_a_rate_outside_one_to_the_maximum_is_refused(tps: int, wanted: int) -> None:
    with pytest.raises(BadRequest, match=r"at least 1|above this platform's maximum"):
        apply(_run(tps=tps), SetRate(wanted), now=NOW, lead_s=LEAD_S, max_tps=MAX_TPS)


@given(rates)
def test_the_same_rate_is_refused(tps: int) -> None:
    with pytest.raises(BadRequest, match=f"already set to {tps}/s"):
        apply(_run(tps=tps), SetRate(tps), now=NOW, lead_s=LEAD_S, max_tps=MAX_TPS)


@pytest.mark.parametrize("state", sorted(set(RunState) - CONTROLLABLE_STATES))
def test_a_run_that_is_not_going_is_refused(state: RunState) -> None:
    with pytest.raises(Conflict, match=f"is {state}: only a queued, submitted or running run"):
        apply(_run(state=state), Pause(), now=NOW, lead_s=LEAD_S, max_tps=MAX_TPS)


def test_an_unthrottled_or_reconcile_run_has_no_rate_to_change() -> None:
    with pytest.raises(BadRequest, match="unthrottled"):
        apply(_run(tps=0), SetRate(10), now=NOW, lead_s=LEAD_S, max_tps=MAX_TPS)
    with pytest.raises(BadRequest, match="reconcile run"):
        apply(_run(kind=RunKind.RECONCILE), Pause(), now=NOW, lead_s=LEAD_S, max_tps=MAX_TPS)


def test_a_rate_set_while_paused_is_the_rate_it_resumes_at() -> None:
    run = _applied(_run(tps=1000), [Pause(), SetRate(3000), Resume()])

    assert [(c.tps, c.paused) for c in run.changes] == [(1000, True), (3000, True), (3000, False)]
    assert rate_at(1000, run.changes, NOW + 2.5) == Rate(3000, paused=True)


def test_the_number_of_changes_is_bounded() -> None:
    run = _applied(_run(tps=1000), [Pause(), Resume()] * (MAX_CHANGES // 2))
    assert len(run.changes) == MAX_CHANGES

    with pytest.raises(Conflict, match=f"{MAX_CHANGES} rate changes"):
        apply(run, Pause(), now=NOW + 10_000, lead_s=LEAD_S, max_tps=MAX_TPS)


@settings(max_examples=200)
@given(rates, st.lists(actions, max_size=20), st.floats(min_value=NOW - 10, max_value=NOW + 40))
def test_paused_since_is_the_start_of_the_pause_in_force(tps: int, steps: list[Action], at: float) -> None:
    run = _applied(_run(tps=tps), steps)
    since = paused_since(run.changes, at)

    assert (since is not None) == rate_at(tps, run.changes, at).paused
    if since is not None:
        assert since <= at
        assert all(c.paused for c in run.changes if since <= c.at <= at)


@given(st.lists(st.builds(RateChange, st.floats(0, 2e9), rates, st.booleans()), max_size=10))
def test_changes_survive_the_stores_json_form(changes: list[RateChange]) -> None:
    assert changes_from([c.to_dict() for c in changes]) == tuple(changes)
    assert changes_from(None) == ()
