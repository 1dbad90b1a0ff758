"""`--follow`: poll a run until it ends, with a progress bar. Ctrl-C stops the watching, never the run.

The run lives in the service; the CLI only watches it. So a Ctrl-C says so and prints the commands
that show and cancel it, and the CLI exits 130 (`EXIT_INTERRUPTED`) rather than looking like a failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from daemon.cli.usage import PROG
from daemon.contract.client import DaemonClient
from daemon.contract.models import RunOut
from daemon.core.errors import DependencyDown, Unavailable
from daemon.core.retry import Clock, Sleep, poll

# While following, a daemon that restarts or blinks is "not yet", not the end: the run goes on there.
# One unreachable for a minute is said (exit 1, the run still goes on); a daemon that answered "my
# database is down" has answered, and is said at once.
FOLLOW_TRANSIENT, FOLLOW_PERMANENT, FOLLOW_PATIENCE_S = (Unavailable,), (DependencyDown,), 60.0


def _until_terminal(
    client: DaemonClient,
    actor: str,
    run: RunOut,
    *,
    poll_s: float,
    seen: Callable[[RunOut], None],
    clock: Clock,
    sleep: Sleep,
) -> RunOut:

    def ended() -> RunOut | None:
        now = client.get_replay(actor, run.id)
        seen(now)
        return now if now.terminal else None

    if run.terminal:
        return run
    sleep(poll_s)
    found = poll(
        ended,
        every_s=poll_s,
        timeout_s=None,
        clock=clock,
        sleep=sleep,
        transient=FOLLOW_TRANSIENT,
        permanent=FOLLOW_PERMANENT,
        patience_s=FOLLOW_PATIENCE_S,
    )
    assert found is not None  # no timeout: poll answers or raises
    return found


def follow_run(
    client: DaemonClient,
    actor: str,
    run: RunOut,
    *,
    console: Console,
    show_bar: bool,
    poll_s: float = 1.0,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
) -> RunOut:
    """The run once it is terminal; a KeyboardInterrupt (Ctrl-C) goes through to the caller."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.completed:,.0f} confirmed"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=not show_bar) as bar:
        # only an ended run can have an unknown count: the bar then stays where progress left it
        task = bar.add_task(run.id, total=run.rows or None, completed=run.confirmed or 0)

        def seen(now: RunOut) -> None:
            bar.update(task, completed=now.confirmed, description=f"{now.id} {now.state}")

        return _until_terminal(client, actor, run, poll_s=poll_s, seen=seen, clock=clock, sleep=sleep)


def wait_until_terminal(
    client: DaemonClient,
    actor: str,
    run: RunOut,
    *,
    poll_s: float = 1.0,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
) -> RunOut:
    """A job (such as a reconcile) once it is terminal, without a bar."""
    return _until_terminal(client, actor, run, poll_s=poll_s, seen=lambda _: None, clock=clock, sleep=sleep)


def stopped_following(run_id: str) -> str:
    return (
        f"stopped following {run_id}: the run goes on.\n"
        f"  {PROG} status {run_id}    shows it\n"
        f"  {PROG} cancel {run_id}    cancels it"
    )


def stopped_waiting_for_reconcile(job_id: str, run_id: str) -> str:
    return (
        f"stopped waiting: the reconcile {job_id} of {run_id} goes on; "
        f"`{PROG} status {run_id}` shows its verdict when it is done"
    )
