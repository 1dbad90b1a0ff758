"""The pages' routes on replayd's app: `/login`, `/` (the console), `/runs/<id>` with its chart data
and its verdict's lists (a page at a time, or CSV), `/pipelines/<id>`, and `/static/`. Outside
`/v1/`, so the bearer-token front door leaves them alone: a page is read with the session cookie a
signed link set (`daemon.pages.links`), and a request without one gets a page saying how to get a
link, never a run's data.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

from fastapi import Cookie, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles

from daemon.contract.models import RunOut
from daemon.core.errors import NotFound, RunNotFound, Unavailable
from daemon.core.partitions import Partitions
from daemon.core.reconcile import LISTED_AT_MOST, IdList
from daemon.core.run_control import RateChange, changes_from, rate_at
from daemon.pages import links, views
from daemon.pages.links import SESSION_COOKIE, LinkRefused, PageKeys
from daemon.usecases.catalog import Catalog
from daemon.usecases.janitor import Janitor
from daemon.usecases.pipeline_service import PipelineService
from daemon.usecases.ports import Clusters, DeadLetters
from daemon.usecases.replays import ReplayService, SourceTable
from daemon.usecases.wire import pipeline_out, rate_series_out, run_out, source_out, verdict_ids_out
from store import Store
from store.models import Pipeline, VerdictId

PRIVATE = {"Cache-Control": "no-store"}  # a page shows one person's view of live data

STATIC = Path(links.__file__).parent / "static"
LETTERS_SHOWN = 100  # a run's dead letters its page reads back at most
CHART_SAMPLES = 720  # the watcher's latest progress samples a running run's chart shows
IDS_FIRST = 20  # ids of each verdict list the run page shows (the rest: their own pages, or CSV)
IDS_PAGE = 500  # ids one page of a verdict list shows
PIPELINE_RUNS = 50  # a pipeline's latest runs its page lists
NO_SESSION = "You are not signed in to the pages (or your session has ended, or the service's key changed)."


def add_pages(
    app: FastAPI,
    *,
    keys: PageKeys,
    service: ReplayService,
    pipelines: PipelineService | None,
    store: Store,
    catalog: Catalog,
    dead_letters: Clusters[DeadLetters],
    janitor: Janitor | None = None,
) -> None:
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    def refused(reason: str, status: int) -> HTMLResponse:
        return HTMLResponse(views.refused_page(reason), status_code=status, headers=PRIVATE)

    @app.get("/login", include_in_schema=False)
    def login(request: Request, token: Annotated[str, Query(max_length=2000)] = "") -> Response:
        try:
            opened = keys.open_link(token)
        except LinkRefused as exc:
            return refused(str(exc), 403)
        answer = RedirectResponse(opened.path, status_code=303)
        answer.set_cookie(
            SESSION_COOKIE,
            keys.session(opened.user),
            max_age=int(keys.session_s),
            httponly=True,
            secure=request.url.scheme == "https",
            samesite="lax",
        )
        return answer

    @app.get("/", include_in_schema=False, response_model=None)
    def console(
        replay_session: Annotated[str | None, Cookie()] = None,
        state: Annotated[str | None, Query(max_length=16)] = None,
        source: Annotated[str | None, Query(max_length=64)] = None,
        requester: Annotated[str | None, Query(max_length=64)] = None,
    ) -> HTMLResponse:
        user = keys.session_user(replay_session)
        if user is None:
            return refused(NO_SESSION, 401)
        chosen = views.RunFilter(
            state=state if state in views.STATES else None,
            source=source or None,
            requester=requester or None,
        )
        runs, _ = service.list(
            state=chosen.state, requester=chosen.requester, source=chosen.source, limit=100, cursor=None
        )
        places = service.queue_positions()
        estate = [] if pipelines is None else pipelines.list()
        page = views.console_page(
            [run_out(run, queue_position=places.get(run.id)) for run in runs],
            [pipeline_out(p) for p in estate],
            # the console shows no table versions: no catalog or table is read for it
            [source_out(SourceTable(catalog.sources[name], snapshot=None)) for name in catalog.names()],
            user=user,
            chosen=chosen,
            countdowns={p.id: clock for p in estate if (clock := _countdown(janitor, p)) is not None},
        )
        return HTMLResponse(page, headers=PRIVATE)

    @app.get("/runs/{run_id}", include_in_schema=False, response_model=None)
    def run_page(run_id: str, replay_session: Annotated[str | None, Cookie()] = None) -> HTMLResponse:
        user = keys.session_user(replay_session)
        if user is None:
            return refused(NO_SESSION, 401)
        try:
            run = service.get(run_id)
        except RunNotFound as exc:
            return refused(str(exc), 404)
        out = run_out(run, queue_position=service.queue_positions().get(run_id))
        page = views.run_page(
            out,
            _audit(store, run_id),
            user=user,
            letters=_letters(out, dead_letters),
            partitions=Partitions.from_document(run.partition_progress),
            listed=_listed(service, run_id),
        )
        return HTMLResponse(page, headers=PRIVATE)

    # the CSV route first: "missing.csv" would otherwise be taken for a list's name
    @app.get("/runs/{run_id}/ids/{kind}.csv", include_in_schema=False, response_model=None)
    def ids_csv(run_id: str, kind: str, replay_session: Annotated[str | None, Cookie()] = None) -> Response:
        if keys.session_user(replay_session) is None:
            return refused(NO_SESSION, 401)
        try:
            chosen = _kind(kind)
            rows = service.listed_all(run_id, chosen)
        except NotFound as exc:
            return refused(str(exc), 404)
        name = f"{run_id}-{chosen}.csv"
        return StreamingResponse(
            _csv(rows),
            media_type="text/csv; charset=utf-8",
            headers={**PRIVATE, "Content-Disposition": f'attachment; filename="{name}"'},
        )

    @app.get("/runs/{run_id}/ids/{kind}", include_in_schema=False, response_model=None)
    def ids_page(
        run_id: str,
        kind: str,
        replay_session: Annotated[str | None, Cookie()] = None,
        after: Annotated[int, Query(ge=-1, le=LISTED_AT_MOST)] = -1,
    ) -> HTMLResponse:
        user = keys.session_user(replay_session)
        if user is None:
            return refused(NO_SESSION, 401)
        try:
            chosen = _kind(kind)
            run = service.get(run_id)
            page = verdict_ids_out(run_id, chosen, service, after=after, limit=IDS_PAGE)
        except NotFound as exc:
            return refused(str(exc), 404)
        html = views.ids_page(run_out(run), page, user=user, first=after + 1)
        return HTMLResponse(html, headers=PRIVATE)

    @app.get("/pipelines/{pipeline_id}", include_in_schema=False, response_model=None)
    def pipeline_page(
        pipeline_id: str, replay_session: Annotated[str | None, Cookie()] = None
    ) -> HTMLResponse:
        user = keys.session_user(replay_session)
        if user is None:
            return refused(NO_SESSION, 401)
        if pipelines is None:
            return refused("this service runs no pipelines", 404)
        try:
            detail = pipelines.detail(pipeline_id, runs=PIPELINE_RUNS)
        except NotFound as exc:
            return refused(str(exc), 404)
        page = views.pipeline_page(
            pipeline_out(detail.pipeline),
            [run_out(run) for run in detail.runs],
            _audit(store, pipeline_id),
            user=user,
            countdown=_countdown(janitor, detail.pipeline),
        )
        return HTMLResponse(page, headers=PRIVATE)

    @app.get("/runs/{run_id}/chart.json", include_in_schema=False, response_model=None)
    def chart_data(run_id: str, replay_session: Annotated[str | None, Cookie()] = None) -> JSONResponse:
        if keys.session_user(replay_session) is None:
            return JSONResponse({"error": NO_SESSION}, status_code=401)
        try:
            run = service.get(run_id)
        except RunNotFound as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        series = rate_series_out(run)
        if series is not None:  # the job's own per-second counts, once it has ended
            start = series.start.timestamp()
            asked = series.targets or [float(series.target_tps)] * len(series.counts)
            data = views.ChartData(
                x=[start + second for second in range(len(series.counts))],
                achieved=[float(count) for count in series.counts],
                target=[float(value) for value in asked],
                per_second=True,
            )
        else:  # while it goes: the watcher's samples of the beacons, and the rate in force then
            changes = changes_from(run.control)
            samples = store.runs.progress(run_id, limit=CHART_SAMPLES)
            data = views.ChartData(
                x=[sample.at.timestamp() for sample in samples],
                achieved=[sample.rate for sample in samples],
                target=[_asked(run.tps, changes, sample.at.timestamp()) for sample in samples],
                per_second=False,
            )
        partitions = Partitions.from_document(run.partition_progress)
        return JSONResponse(data.document(run_out(run), partitions), headers=PRIVATE)


def _letters(run: RunOut, readers: Clusters[DeadLetters]) -> views.Letters | None:
    """The run's dead letters read back from its cluster, or why they could not be."""
    if run.dlq_topic is None or not run.dead_lettered:
        return None
    if run.cluster not in readers.names:
        return views.Letters(problem=f"its Kafka cluster {run.cluster} is no longer configured")
    try:
        found = readers[run.cluster].of_run(run.dlq_topic, run.id, limit=LETTERS_SHOWN)
    except Unavailable as exc:
        return views.Letters(problem=str(exc))
    lines = [views.LetterLine(x.event_id, x.reason, x.at, f"{x.partition}/{x.offset}") for x in found]
    return views.Letters(lines=lines, limit=LETTERS_SHOWN)


def _asked(tps: int, changes: tuple[RateChange, ...], at: float) -> float:
    """The rate in force at `at`: none while paused."""
    rate = rate_at(tps, changes, at)
    return 0.0 if rate.paused else float(rate.tps)


def _audit(store: Store, target: str) -> list[views.AuditLine]:
    """The trail of a run or a pipeline, oldest first."""
    return [
        views.AuditLine(
            at=entry.at,
            actor=entry.actor,
            action=entry.action,
            outcome=entry.outcome,
            detail=", ".join(f"{k}={v}" for k, v in sorted((entry.detail or {}).items())),
        )
        for entry in reversed(store.audit.list(100, target=target))
    ]


def _kind(name: str) -> IdList:
    try:
        return IdList(name)
    except ValueError:
        raise NotFound(f"no list {name!r}: a verdict lists missing, unexpected and duplicated ids") from None


def _listed(service: ReplayService, run_id: str) -> views.Listed | None:
    """The verdict's lists' lengths and first ids; None when it listed nothing."""
    counts = service.listed(run_id)
    if not any(counts.values()):
        return None
    first = {
        kind: verdict_ids_out(run_id, kind, service, after=-1, limit=IDS_FIRST).ids
        for kind, count in counts.items()
        if count
    }
    return views.Listed(counts=counts, first=first)


def _csv(rows: Iterator[VerdictId]) -> Iterator[bytes]:
    """``event_id,records`` lines, written as the rows are read (no list is held whole)."""
    yield b"event_id,records\r\n"
    out = io.StringIO()
    writer = csv.writer(out)
    for row in rows:
        writer.writerow((_cell(row.event_id), row.copies))
        if out.tell() > 64_000:
            yield out.getvalue().encode()
            out.seek(0)
            out.truncate()
    yield out.getvalue().encode()


def _cell(text: str) -> str:
    """A CSV cell a spreadsheet will not run: an id starting as a formula would (``=``, ``+``, ``-``,
    ``@``; unexpected ids come from whoever wrote to the topic), so it gets a leading ``'``."""
    return f"'{text}" if text[:1] in _FORMULA else text


_FORMULA = frozenset("=+-@\t\r")


def _countdown(janitor: Janitor | None, pipeline: Pipeline) -> views.Countdown | None:
    clock = janitor.countdown(pipeline) if janitor is not None else None
    return None if clock is None else views.Countdown(idle=clock.idle, at=clock.at)
