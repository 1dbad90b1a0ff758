"""Schedules: the core's pure cron check against APScheduler's, and the fire times built on it.

APScheduler computes the fire times, so it is the oracle: the core must accept exactly the
expressions the grammar lets through *and* ``CronTrigger.from_crontab`` accepts, no more, no less.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from apscheduler.triggers.cron import CronTrigger
from hypothesis import example, given, settings
from hypothesis import strategies as st

from daemon.core.cron import MONTHS, WEEKDAYS, check_cron, parse_cron
from daemon.core.errors import BadRequest
from daemon.core.quantities import InvalidValue
from daemon.core.schedules import check_schedule, schedule_text
from daemon.usecases.fire_times import next_fire

NOW = datetime(2024, 3, 14, 9, 26, 53, tzinfo=UTC)


def _apscheduler_accepts(text: str) -> bool:
    try:
        CronTrigger.from_crontab(text, timezone=UTC)
    except ValueError:
        return False
    return True


def _grammar_accepts(text: str) -> bool:
    try:
        parse_cron(text)
    except InvalidValue:
        return False
    return True


def _core_accepts(text: str) -> bool:
    try:
        check_cron(text)
    except InvalidValue:
        return False
    return True


# Numbers around every field's bounds, with leading zeros and one too long for any field.
numbers = st.one_of(
    st.integers(min_value=0, max_value=7).map(str),
    st.integers(min_value=0, max_value=32).map(str),
    st.integers(min_value=0, max_value=64).map(str),
    st.integers(min_value=0, max_value=64).map(lambda n: f"0{n}"),
    st.just("9" * 25),
)
names = st.sampled_from([*MONTHS, *WEEKDAYS]).flatmap(
    lambda name: st.sampled_from([name, name.upper(), name.title()])
)
atoms = st.one_of(numbers, names, st.just("*"))
entries = st.one_of(
    atoms,
    st.tuples(atoms, atoms).map("-".join),
    st.tuples(atoms, numbers).map("/".join),
    st.tuples(atoms, atoms, numbers).map(lambda t: f"{t[0]}-{t[1]}/{t[2]}"),
    # Free-form runs of the alphabet, so malformed entries (``1--2``, ``jan5``, ``*/``) come up too.
    st.lists(st.one_of(st.sampled_from(list("0123456789*/-")), names), min_size=1, max_size=5).map("".join),
    st.just(""),  # a stray comma
)
fields = st.lists(entries, min_size=1, max_size=3).map(",".join).filter(bool)
# Mostly one or two interesting fields among stars, so that valid expressions come up often too.
expressions = st.lists(st.just("*") | fields, min_size=5, max_size=5).map(" ".join)


@settings(max_examples=3000, deadline=None)
@given(expressions)
@example("*/15 * * * *")
@example("0-0/5 * * * *")  # a range ending at 0 spans the whole field (APScheduler's reading)
@example("3-3/1 * * * *")
@example("59/1 * * * *")
@example("* * * jan5 *")  # APScheduler reads a month name up to its last letter
@example("* * * jan-5 *")
@example("* * * * mon-fri/2")
@example("* * 0 * *")
@example("* * * * 7")
def test_the_core_accepts_exactly_what_the_grammar_and_apscheduler_both_accept(text: str) -> None:
    assert _core_accepts(text) == (_grammar_accepts(text) and _apscheduler_accepts(text))


@given(expressions)
@settings(max_examples=300, deadline=None)
def test_an_accepted_cron_is_returned_as_given_and_always_gets_a_next_fire_time(text: str) -> None:
    if not _core_accepts(text):
        return
    assert check_cron(text) == text
    check_schedule(f"cron={text}")
    try:
        fire = next_fire(f"cron={text}", NOW)
    except BadRequest as exc:  # e.g. only on February 30th: valid fields, no date ever matches
        assert "never fires again" in str(exc)
        return
    assert fire > NOW


@pytest.mark.parametrize(
    "text",
    ["*/15 * * * *", "0 6 * * mon-fri", "0 0 1 1 *", "0,30 9-17 * * MON-FRI", "5/10 * 31 jan,mar *"],
)
def test_usual_expressions_pass(text: str) -> None:
    assert check_cron(text) == text


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("61 * * * *", "minute field: '61': minute must be between 0 and 59"),
        ("* 24 * * *", "hour field: '24': hour must be between 0 and 23"),
        ("* * 0 * *", "day field: '0': day must be between 1 and 31"),
        ("* * * 13 *", "month field: '13': month must be between 1 and 12"),
        ("* * * * 7", "weekday field: '7': weekday must be between 0 and 6"),
        ("*/0 * * * *", "minute field: '*/0': a step must be at least 1"),
        ("*/60 * * * *", "minute field: '*/60': the step is larger than the span it steps through (59)"),
        ("5-1 * * * *", "minute field: '5-1': the range runs backwards"),
        ("* * * dec-jan *", "month field: 'dec-jan': the range runs backwards"),
        ("* * * mon *", "month field: 'mon' is not a month name"),
        ("* * * * jan", "weekday field: 'jan' is not a weekday name"),
        ("jan * * * *", "minute field: 'jan' is not a number, a range or a step"),
        ("1,,2 * * * *", "minute field: an empty entry (a stray comma?)"),
        ("*/15 * * *", "a cron expression has 5 fields"),
        ("? * * * *", "may only use digits"),
        ("0 0 * foo *", "unknown name 'foo'"),
    ],
)
def test_each_kind_of_mistake_gets_its_own_reason(text: str, reason: str) -> None:
    with pytest.raises(InvalidValue) as caught:
        check_cron(text)
    assert reason in caught.value.reason
    assert not _apscheduler_accepts(text) or not _grammar_accepts(text)


def test_a_bad_stored_schedule_is_refused_with_the_expression_and_the_reason() -> None:
    with pytest.raises(BadRequest, match=r'cron="61 \* \* \* \*" is not a valid schedule: minute field'):
        check_schedule("cron=61 * * * *")
    with pytest.raises(BadRequest, match="at least 1m"):
        check_schedule("every=30s")
    with pytest.raises(BadRequest, match="unknown schedule 'hourly'"):
        check_schedule("hourly")
    check_schedule("every=15m")


def test_schedule_text_is_the_stored_form() -> None:
    assert schedule_text(every_seconds=900, cron=None) == "every=15m"
    assert schedule_text(every_seconds=None, cron="0 6 * * *") == "cron=0 6 * * *"
    with pytest.raises(BadRequest, match="shortest schedule is every=1m"):
        schedule_text(every_seconds=59, cron=None)
    with pytest.raises(BadRequest, match="exactly one"):
        schedule_text(every_seconds=60, cron="* * * * *")


def test_intervals_are_anchored_at_the_epoch_and_missed_slots_collapse() -> None:
    assert next_fire("every=15m", NOW) == datetime(2024, 3, 14, 9, 30, tzinfo=UTC)
    on_a_slot = datetime(2024, 3, 14, 9, 30, tzinfo=UTC)
    assert next_fire("every=15m", on_a_slot) == on_a_slot + timedelta(minutes=15)  # strictly after
    assert next_fire("cron=0 6 * * *", NOW) == datetime(2024, 3, 15, 6, 0, tzinfo=UTC)


def test_a_cron_that_never_matches_a_date_never_fires() -> None:
    check_schedule("cron=0 0 30 feb *")  # every field is valid on its own
    with pytest.raises(BadRequest, match="never fires again"):
        next_fire("cron=0 0 30 feb *", NOW)
