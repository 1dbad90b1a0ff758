"""The pages people read in a browser: a run's page and the estate console, as HTML.

Server-rendered from the wire models (what the API answers), with Jinja2 templates under
``templates/`` and no script but the run page's chart: `static/run.js` draws it with uPlot (vendored
in ``static/``, MIT, so the pages work on a network with no way out) from ``/runs/<id>/chart.json``
and polls that while the run goes. Pages read; acting stays in Slack and the CLI
(docs/decisions/0059).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from daemon.contract.models import ListedIdOut, PipelineOut, RunOut, SourceOut, VerdictIdsOut
from daemon.core.clusters import DEFAULT_CLUSTER
from daemon.core.partitions import Partitions
from daemon.core.reconcile import LISTED_AT_MOST, IdList
from daemon.core.states import TERMINAL_RUN_STATES, RunState

UPLOT = "uplot-1.6.31.min"  # the vendored chart library's files, without their extension
STATES = tuple(str(state) for state in RunState)


@dataclass(frozen=True)
class AuditLine:
    """One entry of a run's audit trail, as the page shows it."""

    at: datetime
    actor: str
    action: str
    outcome: str
    detail: str


@dataclass(frozen=True)
class LetterLine:
    """One dead letter of the run, as the page lists it."""

    event_id: str
    reason: str
    at: datetime | None
    where: str  # partition/offset on the dead-letter topic


@dataclass(frozen=True)
class Letters:
    """The run's dead letters the page could read (the first `shown`), or why it could not."""

    lines: Sequence[LetterLine] = ()
    problem: str | None = None
    limit: int = 0


@dataclass(frozen=True)
class Listed:
    """A verdict's lists as the run page opens them: each one's length and its first ids."""

    counts: dict[IdList, int]
    first: dict[IdList, list[ListedIdOut]]


@dataclass(frozen=True)
class Countdown:
    """A pipeline's idle clock: when it turns idle unless a run publishes, or when it is removed."""

    idle: bool
    at: datetime


@dataclass(frozen=True)
class RunFilter:
    """The console's choice of runs: by state, source and requester (None: any)."""

    state: str | None = None
    source: str | None = None
    requester: str | None = None


@dataclass(frozen=True)
class ChartData:
    """The run page's chart: epoch seconds, the rate achieved there, and the rate asked for there."""

    x: list[float]
    achieved: list[float]
    target: list[float]
    per_second: bool  # the job's own per-second counts (after the end), else the watcher's samples

    def document(self, run: RunOut, partitions: Partitions | None = None) -> dict[str, Any]:
        return {
            "state": str(run.state),
            "terminal": run.state in TERMINAL_RUN_STATES,
            "confirmed": run.confirmed,
            "per_second": self.per_second,
            "x": self.x,
            "achieved": self.achieved,
            "target": self.target,
            # each partition's line, for the table under the chart (its shape is PartitionProgress's)
            "partitions": [line.document() for line in partitions.lines] if partitions else [],
            "partitions_final": partitions.final if partitions else False,  # the job's report
        }


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("daemon.pages", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["count"] = lambda value: "unknown" if value is None else f"{value:,}"
    env.filters["share"] = lambda value: "—" if value is None else f"{value:.0%}"
    env.filters["when"] = lambda value: "—" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")
    env.globals.update(uplot=UPLOT, default_cluster=DEFAULT_CLUSTER)
    return env


_ENV = _environment()


def run_page(
    run: RunOut,
    audit: Sequence[AuditLine],
    *,
    user: str,
    letters: Letters | None = None,
    partitions: Partitions | None = None,
    listed: Listed | None = None,
) -> str:
    """`letters`: None when the run set nothing aside (or has no dead-letter topic); `partitions`:
    None before any beacon came; `listed`: the verdict's lists (None: nothing listed)."""
    return _ENV.get_template("run.html").render(
        run=run,
        audit=audit,
        user=user,
        terminal=run.state in TERMINAL_RUN_STATES,
        letters=letters,
        partitions=partitions,
        listed=listed,
        kinds=list(IdList),
        listed_at_most=LISTED_AT_MOST,
    )


def ids_page(run: RunOut, page: VerdictIdsOut, *, user: str, first: int) -> str:
    """One page of a verdict list; ``first``: the place of its first id (0-based)."""
    return _ENV.get_template("ids.html").render(run=run, page=page, user=user, first=first)


def pipeline_page(
    pipeline: PipelineOut,
    runs: Sequence[RunOut],
    audit: Sequence[AuditLine],
    *,
    user: str,
    countdown: Countdown | None,
) -> str:
    return _ENV.get_template("pipeline.html").render(
        pipeline=pipeline, runs=runs, audit=audit, user=user, countdown=countdown
    )


def console_page(
    runs: Sequence[RunOut],
    pipelines: Sequence[PipelineOut],
    sources: Sequence[SourceOut],
    *,
    user: str,
    chosen: RunFilter,
    countdowns: dict[str, Countdown] | None = None,
) -> str:
    """`countdowns`: each pipeline's idle clock by id (absent: archived, or being removed)."""
    return _ENV.get_template("console.html").render(
        runs=runs,
        pipelines=pipelines,
        sources=sources,
        user=user,
        chosen=chosen,
        states=STATES,
        countdowns=countdowns or {},
    )


def error_page(reason: str) -> str:
    """What a browser is told about an address it cannot be shown (no such page, a bad parameter),
    instead of the JSON error an API client gets."""
    return _ENV.get_template("error.html").render(reason=reason, user=None)


def refused_page(reason: str) -> str:
    """What a browser without a session (or with a link that cannot sign in) is told instead."""
    return _ENV.get_template("refused.html").render(reason=reason, user=None)
