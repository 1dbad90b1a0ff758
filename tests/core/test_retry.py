"""`RetryPolicy` and `poll`: only declared errors are tried again, the clock is the caller's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.errors import DependencyDown, NotFound, Unavailable
from daemon.core.retry import RetryPolicy, poll

POLICY = RetryPolicy(attempts=3, pause_s=0.5, transient=(Unavailable,), permanent=(DependencyDown,))


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(errors: list[BaseException], answer: str = "done") -> tuple[list[int], object]:
    calls: list[int] = []

    def work() -> str:
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return answer

    return calls, work


@given(st.integers(min_value=0, max_value=2))
def test_transient_errors_are_tried_again_up_to_the_attempts(failures: int) -> None:
    clock = FakeClock()
    calls, work = failing([Unavailable("down")] * failures)

    assert POLICY.call(work, sleep=clock.sleep) == "done"  # type: ignore[arg-type]
    assert len(calls) == failures + 1
    assert clock.sleeps == [0.5] * failures


def test_the_last_transient_error_is_raised_after_the_last_attempt() -> None:
    clock = FakeClock()
    calls, work = failing([Unavailable(f"down {n}") for n in range(5)])

    with pytest.raises(Unavailable, match="down 2"):
        POLICY.call(work, sleep=clock.sleep)  # type: ignore[arg-type]
    assert (len(calls), clock.sleeps) == (3, [0.5, 0.5])


@pytest.mark.parametrize(
    "error", [DependencyDown("kafka", "127.0.0.1:9092", "down"), NotFound("no run"), KeyboardInterrupt()]
)
def test_a_permanent_or_undeclared_error_is_raised_at_once(error: BaseException) -> None:
    clock = FakeClock()
    calls, work = failing([error])

    with pytest.raises(type(error)):
        POLICY.call(work, sleep=clock.sleep)  # type: ignore[arg-type]
    assert (len(calls), clock.sleeps) == (1, [])


@given(
    attempts=st.integers(min_value=1, max_value=12),
    pause=st.floats(min_value=0, max_value=5),
    backoff=st.floats(min_value=1, max_value=3),
    cap=st.floats(min_value=0.1, max_value=60),
)
def test_pauses_grow_by_the_backoff_and_never_pass_the_cap(
    attempts: int, pause: float, backoff: float, cap: float
) -> None:
    policy = RetryPolicy(
        attempts=attempts, pause_s=pause, transient=(Unavailable,), backoff=backoff, max_pause_s=cap
    )
    pauses = policy.pauses()

    assert len(pauses) == attempts - 1
    assert all(p <= cap for p in pauses)
    assert pauses == sorted(pauses)


@pytest.mark.parametrize("bad", [{"attempts": 0}, {"pause_s": -1.0}, {"backoff": 0.5}])
def test_a_policy_that_cannot_work_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="not a retry policy"):
        RetryPolicy(**{"attempts": 2, "pause_s": 1.0, "transient": (Unavailable,), **bad})  # type: ignore[arg-type]


def test_poll_answers_the_first_answer_and_counts_transient_errors_as_not_yet() -> None:
    clock = FakeClock()
    answers: list[object] = [None, Unavailable("blip"), None, "ready"]

    def check() -> str | None:
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer  # type: ignore[return-value]

    found = poll(
        check, every_s=2, timeout_s=60, clock=lambda: clock.now, sleep=clock.sleep, transient=(Unavailable,)
    )
    assert (found, clock.sleeps) == ("ready", [2, 2, 2])


@given(st.floats(min_value=0.1, max_value=10), st.floats(min_value=0, max_value=30))
def test_poll_gives_up_at_its_timeout_and_never_sleeps_past_it(every: float, timeout: float) -> None:
    clock = FakeClock()

    found = poll(lambda: None, every_s=every, timeout_s=timeout, clock=lambda: clock.now, sleep=clock.sleep)

    assert found is None
    assert clock.now == pytest.approx(max(timeout, 0.0))


def test_poll_raises_an_undeclared_error() -> None:
    clock = FakeClock()

    def check() -> None:
        raise NotFound("gone")

    with pytest.raises(NotFound):
        poll(
            check,
            every_s=1,
            timeout_s=10,
            clock=lambda: clock.now,
            sleep=clock.sleep,
            transient=(Unavailable,),
        )


def test_poll_waits_out_transient_errors_only_for_its_patience() -> None:
    clock = FakeClock()

    def check() -> None:
        raise Unavailable("daemon gone")

    with pytest.raises(Unavailable):
        poll(
            check,
            every_s=5,
            timeout_s=None,
            clock=lambda: clock.now,
            sleep=clock.sleep,
            transient=(Unavailable,),
            patience_s=60,
        )
    assert clock.now == 60  # twelve pauses of 5 s, then the error is said


def test_a_good_look_resets_the_patience() -> None:
    clock = FakeClock()
    looks: list[object] = [Unavailable("blip")] * 10 + [None] + [Unavailable("blip")] * 10 + ["done"]

    def check() -> str | None:
        look = looks.pop(0)
        if isinstance(look, BaseException):
            raise look
        return look  # type: ignore[return-value]

    found = poll(
        check,
        every_s=5,
        timeout_s=None,
        clock=lambda: clock.now,
        sleep=clock.sleep,
        transient=(Unavailable,),
        permanent=(DependencyDown,),
        patience_s=60,
    )
    assert found == "done"  # 50 s of errors, a good look, 50 s more: never 60 in a row


def test_poll_raises_a_permanent_subclass_of_a_transient_error_at_once() -> None:
    clock = FakeClock()

    def check() -> None:
        raise DependencyDown("database", "db:5432", "down")

    with pytest.raises(DependencyDown):
        poll(
            check,
            every_s=1,
            timeout_s=None,
            clock=lambda: clock.now,
            sleep=clock.sleep,
            transient=(Unavailable,),
            permanent=(DependencyDown,),
        )
    assert clock.sleeps == []
