"""`--follow`: poll a run until it ends, with a progress bar. Ctrl-C stops the watching, never the run.

The run lives in the service; the CLI only watches it. So a Ctrl-C says so and prints the commands
that show and cancel it, and the CLI exits 130 (`EXIT_INTERRUPTED`) rather than looking like a failure.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from daemon.cli.usage import PROG
from daemon.contract.client import DaemonClient
from daemon.contract.models import RunOut


def follow_run(
    client: DaemonClient, actor: str, run: RunOut, *, console: Console, show_bar: bool, poll_s: float = 1.0
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
        task = bar.add_task(run.id, total=run.rows or None, completed=run.confirmed)
        while not run.terminal:
            time.sleep(poll_s)
            run = client.get_replay(actor, run.id)
            bar.update(task, completed=run.confirmed, description=f"{run.id} {run.state}")
    return run


def wait_until_terminal(client: DaemonClient, actor: str, run: RunOut, *, poll_s: float = 1.0) -> RunOut:
    """A job (such as a reconcile) once it is terminal, without a bar."""
    while not run.terminal:
        time.sleep(poll_s)
        run = client.get_replay(actor, run.id)
    return run


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
