"""When the driver refuses a transactional run from the cluster's metadata (``refusal``): only when it
is certain that no broker can create the transaction log, never on a guess."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spark_job.publish.transactions import refusal

factors = st.lists(st.integers(1, 9), min_size=1, max_size=9)


def test_a_log_that_needs_three_replicas_on_one_broker_is_refused_with_the_next_step() -> None:
    reason = refusal(1, [3])
    assert reason is not None
    assert "replication.factor is 3 and it has 1 live broker;" in reason
    assert "__transaction_state" in reason and "delivery=idempotent" in reason


@given(live=st.integers(1, 9), known=factors, unknown_at=st.integers(0, 9))
def test_one_broker_whose_setting_is_unknown_means_no_refusal(
    live: int, known: list[int], unknown_at: int
) -> None:
    with_unknown: list[int | None] = [*known]
    with_unknown.insert(unknown_at % (len(known) + 1), None)
    assert refusal(live, with_unknown) is None


@given(live=st.integers(1, 9), known=factors)
def test_refused_exactly_when_no_broker_could_create_the_log(live: int, known: list[int]) -> None:
    """The least factor decides: one broker able to create the log with the live brokers there is
    enough for a task to try."""
    reason = refusal(live, list(known))
    assert (reason is None) == any(factor <= live for factor in known)
    if reason is not None:  # the figure it names is the one that decided
        assert f"is {min(known)} and it has {live} live broker" in reason


@given(live=st.integers(1, 8), known=factors)
def test_more_live_brokers_never_turn_an_answer_into_a_refusal(live: int, known: list[int]) -> None:
    if refusal(live, list(known)) is None:
        assert refusal(live + 1, list(known)) is None


def test_no_setting_read_at_all_is_no_refusal() -> None:
    assert refusal(1, []) is None
