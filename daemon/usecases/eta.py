"""The plan's ETA: from the command to the run's final state, as a person planning an incident needs it.

    eta = wait for a slot + start-up + rows / tps + wind-down

Publishing takes `rows / tps` at the asked rate (the job paces to it); a run with a ramp (`ramp=`)
takes longer by what the ramp holds back (`daemon.core.rate_shape.publish_s`). Start-up (submission to the
first event the broker confirmed: JVM, Spark session, listing, planning, and on EMR the application)
and wind-down (the last confirmed event to the final state: the reconcile, the result, the watcher)
are learned: the median over this launcher's last `HISTORY_RUNS` succeeded runs that reported their
delivery span. Until a launcher has such runs, its documented default stands in:

- local: 20 s to the first event and 3 s after the last, measured on an idle 2-core machine with
  `local[2]` (15,000 rows; a busy machine takes longer, which the learned median then shows); 4 s to
  the first event when a standby driver is ready (3.3 to 3.4 s measured, `bench/e2e.py --start warm`);
- emr: each one-time run creates, starts and then tears down its own application; starting one
  (provisioning the pre-initialized driver and executors, pulling the image) takes about a minute,
  and the Spark driver's own start another 20-40 s, so 90 s sits in the middle of the usual range;
  on a warm application (`emr.warm_applications`, started, its capacity up) only the driver's start
  is left: 30 s, the middle of that range (not measured here: the local endpoint has no image to pull).

A launcher with an execution timeout (EMR Serverless: `emr.execution_timeout_minutes`) kills a job
that runs longer, part-way through its window, so a plan whose ETA exceeds it is refused up front
(`check_execution_limit`). The local launcher has none.

When the launcher can tell whether the run would start warm (`Launcher.warm`: a ready standby driver,
a started warm application),
the start-up is learned from the runs that started the same way, and the default is the warm one.

The median, not the mean: one run that waited for a cold image or a busy cluster must not move every
later estimate.

A run asked for while the launcher's slots are taken waits for them (`waiting`): each run holding a
slot holds it for what is left of its own estimate (its unsent rows at its rate once it delivers,
else what is left of its start-up, then its rows and wind-down), each queued run ahead for its whole
estimate, scheduled oldest first on the slots (`daemon.core.queue_wait`). The plan counts that wait
in its ETA and says it apart; a run's card shows the ETA the run was created with, wait included.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from datetime import datetime

from daemon.core import rate_shape
from daemon.core.errors import RunTooLong
from daemon.core.quantities import render_duration
from daemon.core.queue_wait import queue_wait_s
from store import Store
from store.models import Run

HISTORY_RUNS = 10
DEFAULT_STARTUP_S = {"local": 20.0, "emr": 90.0, "spark": 30.0}  # spark: executors start on the cluster too
WARM_STARTUP_S = {"local": 4.0, "emr": 30.0}  # a ready standby (ADR 0049), a started application (0050)
DEFAULT_FINISH_S = {"local": 3.0, "emr": 10.0, "spark": 3.0}


@dataclass(frozen=True)
class Eta:
    startup_s: float
    publish_s: float
    finish_s: float
    learned_from: int = 0  # runs the overheads were learned from; 0: the launcher's defaults
    warm: bool | None = None  # it would start warm (True), cold (False); None: the launcher cannot tell
    queue_s: float = 0.0  # waiting for a launcher slot behind the runs ahead
    ahead: int = 0  # runs ahead of it (holding a slot or queued) while it waits; 0: it starts at once

    @property
    def service_s(self) -> float:
        """From the launch to the final state: what the launcher's execution timeout counts."""
        return self.startup_s + self.publish_s + self.finish_s

    @property
    def total_s(self) -> float:
        return self.queue_s + self.service_s


def estimate(
    store: Store,
    *,
    launcher_kind: str,
    rows: int,
    tps: int,
    startup_default_s: float | None = None,
    history: int = HISTORY_RUNS,
    ramp_s: int | None = None,
    publish_s: float | None = None,
    warm: bool | None = None,
) -> Eta:
    """The ETA of `rows` at `tps` (after a ramp of `ramp_s`; `publish_s` when the shape says how long
    publishing takes) on this launcher, its overheads learned from its recent runs (those that started
    warm, or cold, when `warm` says which this one would)."""
    if publish_s is None:
        publish_s = rate_shape.publish_s(rows, tps, ramp_s)
    timings = store.runs.launch_timings(launcher_kind, history, warm=warm) if history > 0 else []
    if timings:
        return Eta(
            startup_s=statistics.median(t.startup_s for t in timings),
            publish_s=publish_s,
            finish_s=statistics.median(t.finish_s for t in timings),
            learned_from=len(timings),
            warm=warm,
        )
    if warm and launcher_kind in WARM_STARTUP_S:
        startup = WARM_STARTUP_S[launcher_kind]
    elif startup_default_s is not None:
        startup = startup_default_s
    else:
        startup = DEFAULT_STARTUP_S.get(launcher_kind, 60.0)
    finish = DEFAULT_FINISH_S.get(launcher_kind, 5.0)
    return Eta(startup_s=startup, publish_s=publish_s, finish_s=finish, warm=warm)


def check_execution_limit(eta: Eta, *, rows: int, tps: int, limit_s: float | None, setting: str) -> None:
    """Refuse a plan the launcher would kill part-way: its ETA exceeds the execution timeout."""
    if limit_s is None or eta.service_s <= limit_s:
        return
    room_s = limit_s - eta.startup_s - eta.finish_s
    need_tps = -(-rows // int(room_s)) if room_s >= 1 else None
    raise_tps = f"raise tps to at least {need_tps}, " if need_tps is not None else ""
    raise RunTooLong(
        f"this replay would take about {render_duration(int(eta.service_s))} ({rows} rows at {tps}/s), "
        f"longer than the launcher's execution timeout of {render_duration(int(limit_s))}, which would "
        f"kill it part-way: {raise_tps}narrow the window, or raise {setting}"
    )


def waiting(store: Store, eta: Eta, *, capacity: int | None, now: datetime) -> Eta:
    """``eta`` with the wait for a launcher slot behind the runs ahead; unchanged when one is free."""
    if capacity is None:
        return eta
    holding, queued = store.runs.line()
    left = [_left_s(run, eta, now) for run in holding]
    whole = [eta.startup_s + _publish_s(run, _rows(run)) + eta.finish_s for run in queued]
    wait = queue_wait_s(left, whole, capacity)
    if wait <= 0:
        return eta
    return replace(eta, queue_s=wait, ahead=len(holding) + len(queued))


def _rows(run: Run) -> int:
    rows = run.rows_selected if run.rows_selected is not None else run.options.planned_rows
    return rows or 0


def _publish_s(run: Run, rows: int) -> float:
    if run.options.shaped_s is not None:  # tps=original: the plan's time of the window's own shape
        return run.options.shaped_s
    return rate_shape.publish_s(rows, run.tps, run.options.ramp_s)


def _left_s(run: Run, eta: Eta, now: datetime) -> float:
    """How long a run holding a slot still holds it, by the same overheads as the new run's."""
    rows = _rows(run)
    if run.first_delivery_at is not None and run.confirmed is not None:
        left_s = max(0, rows - run.confirmed) / run.tps if run.tps > 0 else 0.0
        # in its ramp, or on its own timeline: the rest does not go at the full rate
        if run.options.ramp_s or run.options.shaped_s is not None:
            delivering_s = max(0.0, (now - run.first_delivery_at).total_seconds())
            left_s = max(left_s, _publish_s(run, rows) - delivering_s)
        return left_s + eta.finish_s
    since = run.submitted_at or run.admitted_at
    started_s = 0.0 if since is None else max(0.0, (now - since).total_seconds())
    return max(0.0, eta.startup_s - started_s) + _publish_s(run, rows) + eta.finish_s
