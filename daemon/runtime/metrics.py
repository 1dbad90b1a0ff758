"""Prometheus metrics, computed from the store at scrape time.

The store is the source of truth (several daemons may share it), so nothing is counted in memory:
a scrape reads runs by state, store-wide and per-source totals, and the runs worth a graph.

Per-run series carry `run_id` and `source` only, and only for a bounded set of runs: every
unfinished run (at most `MAX_UNFINISHED`) plus the last `FINISHED_KEPT` that ended, so a finished run
stays on a dashboard for a while and the label set never grows with history. Every series is listed
in the metrics table of docs/production.md; `docs/grafana/replay.json` queries them by these names.

Rates are in events per second (the name says so, `_per_second`, as Prometheus' base-unit rule asks).
A run's state is a state set (`replay_run_state{replay_run_state="running"} 1`, one series per state),
not a label of the info metric: a label that changes mints a new series at every transition. Every
daemon on one store exports the same values, so the dashboard takes `max by` the run's or source's
labels, never a sum across daemons.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, StateSetMetricFamily
from sqlalchemy import func, select

from daemon.core.drain import groups_from
from daemon.core.run_control import changes_from, latest_rate
from daemon.core.states import TERMINAL_RUN_STATES, RunState
from store.models import Run

if TYPE_CHECKING:
    from store import Store

MAX_UNFINISHED = 200  # far above the caps on unfinished runs: a bound on labels, not a policy
FINISHED_KEPT = 10
RUN_LABELS = ["run_id", "source"]

Family = GaugeMetricFamily | CounterMetricFamily | StateSetMetricFamily


class _StoreCollector:
    def __init__(self, store: Store, *, finished_kept: int) -> None:
        self._store = store
        self._finished_kept = finished_kept

    def collect(self) -> Iterator[Family]:
        yield from self._totals()
        yield from self._by_source()
        yield from self._per_run(self._graphed_runs())

    def _totals(self) -> Iterator[Family]:
        runs = GaugeMetricFamily("replay_runs", "Runs by state, all runs in the store", labels=["state"])
        for state, count in sorted(self._store.runs.count_by_state().items()):
            runs.add_metric([str(state)], count)
        yield runs
        totals = self._store.runs.totals()
        yield CounterMetricFamily(
            "replay_events_confirmed", "Events confirmed by the broker, all runs", value=totals["confirmed"]
        )
        yield CounterMetricFamily(
            "replay_launch_failures", "Runs whose job could not be launched", value=totals["launch_failures"]
        )

    def _by_source(self) -> Iterator[Family]:
        """Totals per catalog source (bounded by the catalog, not by history)."""
        stmt = select(
            Run.source, func.count(), func.sum(Run.confirmed), func.sum(Run.dead_lettered)
        ).group_by(Run.source)
        with self._store.session() as session:
            rows = sorted(session.execute(stmt).all())
        runs = CounterMetricFamily("replay_source_runs", "Runs ever created, by source", labels=["source"])
        confirmed = CounterMetricFamily(
            "replay_source_events_confirmed", "Events confirmed by the broker, by source", labels=["source"]
        )
        dead = CounterMetricFamily(
            "replay_source_events_dead_lettered",
            "Events sent to a dead-letter topic, by source",
            labels=["source"],
        )
        for source, count, confirmed_sum, dead_sum in rows:
            runs.add_metric([source], int(count))
            confirmed.add_metric([source], int(confirmed_sum or 0))
            dead.add_metric([source], int(dead_sum or 0))
        yield from (runs, confirmed, dead)

    def _graphed_runs(self) -> list[Run]:
        """Every unfinished run, then the last ones to end: the bounded set per-run series cover."""
        terminal = list(TERMINAL_RUN_STATES)
        unfinished = (
            select(Run).where(Run.state.not_in(terminal)).order_by(Run.created_at).limit(MAX_UNFINISHED)
        )
        finished = (
            select(Run)
            .where(Run.state.in_(terminal), Run.ended_at.is_not(None))
            .order_by(Run.ended_at.desc(), Run.id)
            .limit(self._finished_kept)
        )
        with self._store.session() as session:
            return [*session.scalars(unfinished), *session.scalars(finished)]

    def _achieved_tps(self, run: Run) -> float | None:
        """A finished run's achieved rate; a going run's rate at its latest progress sample."""
        if run.state in TERMINAL_RUN_STATES:
            return run.achieved_tps
        if run.state != RunState.RUNNING:
            return None
        latest = self._store.runs.progress(run.id, limit=1)
        return latest[-1].rate if latest else None

    def _per_run(self, runs: Sequence[Run]) -> Iterator[Family]:
        info = GaugeMetricFamily(
            "replay_run_info",
            "1 for each graphed run: its kind and target topic (labels that never change for a run)",
            labels=[*RUN_LABELS, "kind", "topic"],
        )
        states = StateSetMetricFamily(
            "replay_run_state", "The run's state: 1 for the one it is in, 0 for the others", labels=RUN_LABELS
        )
        target = GaugeMetricFamily(
            "replay_run_target_events_per_second",
            "The rate the run is asked to publish at now (0 while paused)",
            labels=RUN_LABELS,
        )
        achieved = GaugeMetricFamily(
            "replay_run_achieved_events_per_second",
            "Events per second confirmed: the latest progress sample, or the whole run once ended",
            labels=RUN_LABELS,
        )
        confirmed = CounterMetricFamily(
            "replay_run_events_confirmed", "Events of the run confirmed by the broker", labels=RUN_LABELS
        )
        dead = CounterMetricFamily(
            "replay_run_events_dead_lettered",
            "Events of the run sent to its dead-letter topic",
            labels=RUN_LABELS,
        )
        lag = GaugeMetricFamily(
            "replay_watch_lag",
            "Latest lag of a consumer group the run watches (watch=), on the run's topic",
            labels=[*RUN_LABELS, "group"],
        )
        baseline = GaugeMetricFamily(
            "replay_watch_baseline_lag",
            "The watched group's lag when the run started: caught up means back to about this",
            labels=[*RUN_LABELS, "group"],
        )
        for run in runs:
            labels = [run.id, run.source]
            info.add_metric([*labels, str(run.kind), run.topic], 1)
            states.add_metric(labels, {str(state): state == run.state for state in RunState})
            rate = latest_rate(run.tps, changes_from(run.control))
            target.add_metric(labels, 0 if rate.paused else rate.tps)
            achieved_tps = self._achieved_tps(run)
            if achieved_tps is not None:
                achieved.add_metric(labels, achieved_tps)
            confirmed.add_metric(labels, run.confirmed or 0)
            dead.add_metric(labels, run.dead_lettered or 0)
            for group in groups_from(run.watch):
                if group.lag is not None:
                    lag.add_metric([*labels, group.group], group.lag)
                if group.baseline is not None:
                    baseline.add_metric([*labels, group.group], group.baseline)
        yield from (info, states, target, achieved, confirmed, dead, lag, baseline)


def render_metrics(store: Store, *, finished_kept: int = FINISHED_KEPT) -> tuple[bytes, str]:
    """The Prometheus text of one scrape and its content type."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StoreCollector(store, finished_kept=finished_kept))
    return generate_latest(registry), CONTENT_TYPE_LATEST
