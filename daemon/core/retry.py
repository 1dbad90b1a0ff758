"""One way to retry and one way to poll, with the transient errors declared and the clock passed in.

Every loop that waits on something outside (a daemon that may be restarting, a broker electing a
leader, an EMR job reaching a state, a Slack thread being posted) says two things here: which errors
are worth another try, and how long it may take. Nothing here sleeps or reads a clock of its own, so a
test drives it with a fake clock and the product with the real one.

    CREATE = RetryPolicy(attempts=2, pause_s=1.0, transient=(Unavailable,), permanent=(DependencyDown,))
    run = CREATE.call(lambda: client.create_replay(...), sleep=time.sleep)

    found = poll(lambda: job.state if job.state in DONE else None, every_s=1, timeout_s=600,
                 clock=time.monotonic, sleep=time.sleep)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
Sleep = Callable[[float], None]
Clock = Callable[[], float]


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries at most, ``pause_s`` apart (doubled each time up to ``max_pause_s``).

    Only ``transient`` errors are tried again; ``permanent`` names subclasses of them that are not (a
    daemon that answered "the broker is down" has answered: asking again at once finds the same), and
    ``when``, if given, narrows them further (a library that raises one exception type for every error
    code: only the codes that mean "not yet").
    """

    attempts: int
    pause_s: float
    transient: tuple[type[BaseException], ...]
    permanent: tuple[type[BaseException], ...] = ()
    backoff: float = 1.0
    max_pause_s: float = 30.0
    when: Callable[[BaseException], bool] | None = None

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.pause_s < 0 or self.backoff < 1:
            raise ValueError(f"not a retry policy: {self}")

    def is_transient(self, error: BaseException) -> bool:
        if not isinstance(error, self.transient) or isinstance(error, self.permanent):
            return False
        return self.when is None or self.when(error)

    def pauses(self) -> list[float]:
        """The pauses between the tries, in order (``attempts - 1`` of them)."""
        return [min(self.pause_s * self.backoff**n, self.max_pause_s) for n in range(self.attempts - 1)]

    def call(self, work: Callable[[], T], *, sleep: Sleep) -> T:
        """``work()``; a transient error is tried again after a pause, the last one is raised."""
        for pause in self.pauses():
            try:
                return work()
            except BaseException as error:
                if not self.is_transient(error):
                    raise
            sleep(pause)
        return work()


def poll(
    check: Callable[[], T | None],
    *,
    every_s: float,
    timeout_s: float | None,
    clock: Clock,
    sleep: Sleep,
    transient: tuple[type[BaseException], ...] = (),
    permanent: tuple[type[BaseException], ...] = (),
    patience_s: float | None = None,
) -> T | None:
    """The first non-None answer of ``check()``, asked every ``every_s``; None once ``timeout_s`` passed.

    A ``transient`` error counts as "not yet" (the next look may succeed); any other, and any of the
    ``permanent`` subclasses of a transient one, is raised; so is a transient one once they have gone
    on for ``patience_s`` with no good look in between (a daemon restarting, not one gone). With
    ``timeout_s=None`` it asks until ``check`` answers (a caller's Ctrl-C or cancel ends it). The last
    look is at the deadline, never after it: the pause before it is cut short.
    """
    deadline = None if timeout_s is None else clock() + timeout_s
    failing_since: float | None = None
    while True:
        try:
            answer = check()
            failing_since = None
        except BaseException as error:
            if not isinstance(error, transient) or isinstance(error, permanent):
                raise
            failing_since = clock() if failing_since is None else failing_since
            if patience_s is not None and clock() - failing_since >= patience_s:
                raise
            answer = None
        if answer is not None:
            return answer
        if deadline is not None and clock() >= deadline:
            return None
        pause = every_s if deadline is None else max(0.0, min(every_s, deadline - clock()))
        sleep(pause)
