"""The Replay Service's HTTP API (FastAPI). Thin: parse, call the service, translate errors.

Every /v1 call carries a bearer token (compared in constant time; declared as the document's `bearer`
security scheme, so generated clients send it) and the acting user's id in `X-Replay-Actor`. Every
error, a domain error, a validation error or an unknown route or verb, answers one shape (`ErrorOut`:
`{"error": "<message a person can act on>"}`), declared for every operation in the OpenAPI document.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from daemon.contract.groups import LagOut, RewindBody, RewindOut
from daemon.contract.models import (
    DeleteBody,
    ErrorOut,
    HealthOut,
    IdlePipelinePageOut,
    KeepBody,
    PageLinkBody,
    PageLinkOut,
    PipelineDetailOut,
    PipelineOut,
    PipelinePageOut,
    PlanOut,
    RateSeriesOut,
    RepairBody,
    ReplayBody,
    ResumeBody,
    RunCreated,
    RunOut,
    RunPageOut,
    ScheduleBody,
    SourcesOut,
    TpsBody,
    UnscheduleBody,
    VerdictIdsOut,
    WhoAmIOut,
)
from daemon.core.errors import BadRequest, DependencyDown, Forbidden, NotFound, ReplayError
from daemon.core.grammar import LagCommand, PlanCommand, ReplayCommand
from daemon.core.reconcile import LISTED_AT_MOST, IdList
from daemon.core.states import PipelineState, RunState
from daemon.pages.views import error_page
from daemon.runtime.api_guard import SERVICE, ApiKeys, FrontDoor
from daemon.runtime.pages import PRIVATE
from daemon.runtime.readiness import Readiness
from daemon.runtime.slow_calls import SlowCalls
from daemon.slack.rate_chart import render_run_chart
from daemon.usecases.audit import CREDENTIAL
from daemon.usecases.consumer_groups import ConsumerGroups
from daemon.usecases.group_wire import lag_out, rewind_out
from daemon.usecases.janitor import Janitor
from daemon.usecases.pipeline_service import PipelineService
from daemon.usecases.replays import ReplayService
from daemon.usecases.run_control import RunControlService
from daemon.usecases.wire import (
    idle_pipeline_out,
    pipeline_detail_out,
    pipeline_out,
    plan_out,
    rate_series_out,
    run_out,
    source_out,
    verdict_ids_out,
)
from store.models import Pipeline, Run
from store.pagination import page_oldest_first


class _Unauthorized(Exception):
    """Raised by the auth dependency; answered with 401 (not a domain error: no details leak)."""


def _error(status: int, message: str, **extra: str) -> JSONResponse:
    body = ErrorOut(error=message, **extra).model_dump(exclude_none=True)
    return JSONResponse(status_code=status, content=body)


def _error_for(request: Request, status: int, message: str) -> Response:
    """A page for a browser (it asks for HTML), the JSON error for everyone else."""
    if "text/html" in request.headers.get("accept", ""):
        return HTMLResponse(error_page(message), status_code=status, headers=PRIVATE)
    return _error(status, message)


_ERROR_STATUSES = {
    400: "the request cannot be carried out as asked",
    401: "missing or invalid bearer token",
    403: "the caller may not do this",
    404: "no such run, pipeline, source or route",
    405: "this route does not take that method",
    409: "the run or pipeline is in a state that does not allow it",
    422: "a field or option is invalid",
    429: "a limit on unfinished runs was reached",
    503: "a dependency (Kafka, the table storage, the launcher) is down",
}
# Declared for every operation: what a generated client can expect besides the success. Errors are
# JSON even where the success is not (the chart, the metrics), hence the explicit media type.
_ERROR_SCHEMA = {"$ref": "#/components/schemas/ErrorOut"}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"description": text, "content": {"application/json": {"schema": _ERROR_SCHEMA}}}
    for status, text in _ERROR_STATUSES.items()
}
_BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="the service token (with X-Replay-Actor) or a personal token (`replayd token <user>`)",
)


def _validation_message(exc: RequestValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error.get("loc", ()) if part not in ("body", "query", "path"))
        if error.get("type") == "extra_forbidden":
            problems.append(f"unknown option '{where}'")
        else:
            problems.append(f"{where or 'request'}: {error.get('msg')}")
    return "; ".join(problems) or "invalid request"


def _authorization(bearer: HTTPAuthorizationCredentials | None) -> str | None:
    """The Authorization header as sent, for ``ApiKeys.caller``."""
    return f"{bearer.scheme} {bearer.credentials}" if bearer is not None else None


def _with_error_schema(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The app's OpenAPI document with `ErrorOut` among its schemas (every operation refers to it)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                openapi_version=app.openapi_version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            schemas["ErrorOut"] = ErrorOut.model_json_schema(ref_template="#/components/schemas/{model}")
            app.openapi_schema = document
        return app.openapi_schema

    return openapi


async def _actor(  # async: runs in the request's own context, so CREDENTIAL reaches the route
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_BEARER)] = None,
    x_replay_actor: Annotated[str | None, Header(max_length=64)] = None,
) -> str:
    """Authenticate the caller and name the person it acts for: a personal token acts as its owner
    only; the service token (the bot's) names the user it verified in ``X-Replay-Actor``."""
    caller = request.app.state.keys.caller(_authorization(bearer))  # the front door checked it too
    if caller is None:
        raise _Unauthorized()
    CREDENTIAL.set("service" if caller == SERVICE else "personal")
    if caller != SERVICE:
        if x_replay_actor and x_replay_actor != caller:
            raise Forbidden(
                f"this token is <@{caller}>'s: it acts as its owner only, not as <@{x_replay_actor}>"
            )
        return str(caller)
    if not x_replay_actor:
        raise BadRequest("missing X-Replay-Actor header (the acting user's id)")
    return x_replay_actor


Actor = Annotated[str, Depends(_actor)]
# Every list pages alike: at most `limit` rows, then `next_cursor` for the next page.
PageLimit = Annotated[int, Query(ge=1, le=200)]
MAX_IDS_PAGE = 1000  # ids one page of a verdict list holds at most
PageCursor = Annotated[str | None, Query(max_length=200)]


def create_api(
    service: ReplayService,
    *,
    api_token: str,
    user_tokens: Mapping[str, str] | None = None,
    pipelines: PipelineService | None = None,
    janitor: Janitor | None = None,
    groups: ConsumerGroups | None = None,
    run_control: RunControlService | None = None,
    metrics: Callable[[], tuple[bytes, str]] | None = None,
    readiness: Readiness | None = None,
    slow_calls: SlowCalls,
    page_links: Callable[[str, str | None], PageLinkOut] | None = None,
) -> FastAPI:
    slow = slow_calls
    app = FastAPI(
        title="Replay Service",
        version="1",
        summary="Replay lake tables into Kafka at a set rate",
        responses=ERROR_RESPONSES,
    )
    app.openapi = _with_error_schema(app)  # type: ignore[method-assign]
    app.state.keys = ApiKeys(service=api_token.encode(), personal=dict(user_tokens or {}))
    app.add_middleware(FrontDoor, keys=app.state.keys)

    @app.exception_handler(ReplayError)
    async def _domain_error(_request: Request, exc: ReplayError) -> JSONResponse:
        if isinstance(exc, DependencyDown):  # clients show it as that dependency's, not the daemon's
            return _error(exc.http_status, str(exc), dependency=exc.dependency, where=exc.where)
        return _error(exc.http_status, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        """An unknown route or verb answers like every other error, not with FastAPI's `detail`."""
        message = {404: "no such route", 405: "this route does not take that method"}.get(
            exc.status_code, str(exc.detail)
        )
        response = _error_for(request, exc.status_code, message)
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        return _error_for(request, 422, _validation_message(exc))

    @app.exception_handler(_Unauthorized)
    async def _unauthorized(_request: Request, _exc: _Unauthorized) -> JSONResponse:
        response = _error(401, "missing or invalid bearer token")
        response.headers["WWW-Authenticate"] = "Bearer"
        return response

    @app.get("/healthz", response_model=HealthOut)
    async def healthz() -> HealthOut:
        """Answered on the event loop: never queued behind slow calls holding the worker threads."""
        return HealthOut(status="ok")

    if readiness is not None:

        @app.get("/readyz")
        def readyz() -> JSONResponse:
            """Each dependency's state (`ok`, `not configured`, `down: …`); 503 unless every configured
            one is ok. `/healthz` only says the process is up."""
            states = readiness.check()
            return JSONResponse(status_code=200 if Readiness.ready(states) else 503, content=states)

    if page_links is not None:

        @app.post("/v1/page-links", response_model=PageLinkOut, status_code=201)
        def page_link(body: PageLinkBody, who: Actor) -> PageLinkOut:
            """A link that signs the caller in to the pages (a run's, or the console) for a while."""
            if body.run_id is not None:
                service.get(body.run_id)  # RunNotFound: no link to a page that does not exist
            return page_links(who, body.run_id)

    @app.get("/v1/whoami", response_model=WhoAmIOut)
    def whoami(
        request: Request,
        bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_BEARER)] = None,
        x_replay_actor: Annotated[str | None, Header(max_length=64)] = None,
    ) -> WhoAmIOut:
        """Whom the bearer token acts for: `replay login` checks a token with this before storing it
        (the service token answers even without an actor, so login can refuse it by name)."""
        caller = request.app.state.keys.caller(_authorization(bearer))
        if caller is None:
            raise _Unauthorized()
        if caller == SERVICE:
            return WhoAmIOut(user=x_replay_actor or "-", credential="service")
        return WhoAmIOut(user=caller, credential="personal")

    if metrics is not None:

        @app.get("/metrics", response_class=PlainTextResponse)
        def metrics_endpoint() -> PlainTextResponse:
            body, content_type = metrics()
            return PlainTextResponse(body, media_type=content_type)

    @app.post("/v1/plans", response_model=PlanOut)
    def plan(body: ReplayBody, who: Actor) -> PlanOut:
        return plan_out(service.plan(who, body.command(PlanCommand)))

    @app.post("/v1/replays", response_model=RunCreated, status_code=201)
    def create(
        body: ReplayBody,
        who: Actor,
        idempotency_key: Annotated[str | None, Header(max_length=128)] = None,
    ) -> RunCreated:
        run, created = service.create_replay(
            who,
            body.command(ReplayCommand),
            confirm_live=body.confirm_live,
            approved_by=body.approved_by,
            idempotency_key=idempotency_key,
            slack_channel=body.slack_channel,
            vouched=CREDENTIAL.get() == "service",
        )
        place = service.queue_positions().get(run.id)
        return RunCreated(**dict(run_out(run, queue_position=place)), created=created)

    @app.get("/v1/replays/{run_id}", response_model=RunOut)
    def get(run_id: str, who: Actor) -> RunOut:
        return run_out(service.get(run_id), queue_position=service.queue_positions().get(run_id))

    @app.get("/v1/replays", response_model=RunPageOut)
    def list_runs(
        who: Actor,
        state: Annotated[RunState | None, Query()] = None,
        requester: Annotated[str | None, Query(max_length=64)] = None,
        limit: PageLimit = 20,
        cursor: PageCursor = None,
    ) -> RunPageOut:
        runs, next_cursor = service.list(state=state, requester=requester, limit=limit, cursor=cursor)
        places = service.queue_positions()
        listed = [run_out(run, queue_position=places.get(run.id)) for run in runs]
        return RunPageOut(runs=listed, next_cursor=next_cursor)

    @app.post("/v1/replays/{run_id}/cancel", response_model=RunOut)
    def cancel(run_id: str, who: Actor) -> RunOut:
        return run_out(service.cancel(who, run_id))

    def follow_up(ask: Callable[..., Run], run_id: str, body: RepairBody, who: str) -> RunCreated:
        """A repair or a redrive: the channel only from the service credential (the bot saw it)."""
        channel = body.slack_channel if CREDENTIAL.get() == "service" else None
        run = ask(who, run_id, confirm_live=body.confirm_live, slack_channel=channel)
        place = service.queue_positions().get(run.id)
        return RunCreated(**dict(run_out(run, queue_position=place)), created=True)

    @app.post("/v1/replays/{run_id}/repair", response_model=RunCreated, status_code=201)
    def repair(run_id: str, body: RepairBody, who: Actor) -> RunCreated:
        """Publish only the ids the run's reconcile found missing, into the same topic, then reconcile
        the run's whole selection; answers with the repair run."""
        return follow_up(service.repair, run_id, body, who)

    @app.post("/v1/replays/{run_id}/redrive", response_model=RunCreated, status_code=201)
    def redrive(run_id: str, body: RepairBody, who: Actor) -> RunCreated:
        """Send the run's dead letters back to the topic they were meant for, paced like a replay
        (only those no earlier redrive landed), and reconcile them; answers with the redrive run."""
        return follow_up(service.redrive, run_id, body, who)

    @app.post("/v1/replays/{run_id}/reconcile", response_model=RunOut, status_code=202)
    def reconcile(run_id: str, who: Actor) -> RunOut:
        """Queue a reconcile of a finished run; answers with the reconcile run (kind `reconcile`)."""
        queued = service.reconcile(who, run_id)
        return run_out(queued, queue_position=service.queue_positions().get(queued.id))

    @app.get("/v1/replays/{run_id}/ids/{kind}", response_model=VerdictIdsOut)
    def verdict_ids(
        run_id: str,
        kind: IdList,
        who: Actor,
        after: Annotated[int, Query(ge=-1, le=LISTED_AT_MOST)] = -1,
        limit: Annotated[int, Query(ge=1, le=MAX_IDS_PAGE)] = MAX_IDS_PAGE,
    ) -> VerdictIdsOut:
        """The ids behind the verdict's missing, unexpected or duplicated count, a page at a time."""
        return verdict_ids_out(run_id, kind, service, after=after, limit=limit)

    @app.get("/v1/replays/{run_id}/series", response_model=RateSeriesOut)
    def series(run_id: str, who: Actor) -> RateSeriesOut:
        found = rate_series_out(service.get(run_id))
        if found is None:
            raise NotFound(f"run {run_id} has no rate series (it confirmed nothing, or has not ended)")
        return found

    @app.get("/v1/replays/{run_id}/chart.png", response_class=Response)
    def chart(run_id: str, who: Actor) -> Response:
        """The run's events per second against its target, as a PNG (the chart its thread got)."""
        run = service.get(run_id)
        found = rate_series_out(run)
        if found is None:
            raise NotFound(f"run {run_id} has no rate series (it confirmed nothing, or has not ended)")
        with slow.held(who, "ask for the chart again"):
            return Response(content=render_run_chart(run_out(run), found), media_type="image/png")

    @app.get("/v1/sources", response_model=SourcesOut)
    def sources(who: Actor) -> SourcesOut:
        return SourcesOut(sources=[source_out(source) for source in service.sources()])

    if pipelines is not None:
        _pipeline_routes(app, pipelines)
    if janitor is not None:
        _janitor_routes(app, janitor)
    if groups is not None:
        _group_routes(app, groups, slow)
    if run_control is not None:
        _run_control_routes(app, run_control)
    return app


def _run_control_routes(app: FastAPI, control: RunControlService) -> None:
    """Live control of a going run: each answers the run, with its new `current_tps` and `paused`."""

    @app.post("/v1/replays/{run_id}/tps", response_model=RunOut)
    def set_tps(run_id: str, body: TpsBody, who: Actor) -> RunOut:
        return run_out(control.set_tps(who, run_id, body.tps))

    @app.post("/v1/replays/{run_id}/pause", response_model=RunOut)
    def pause_run(run_id: str, who: Actor) -> RunOut:
        return run_out(control.pause(who, run_id))

    @app.post("/v1/replays/{run_id}/resume", response_model=RunOut)
    def resume_run(run_id: str, who: Actor) -> RunOut:
        return run_out(control.resume(who, run_id))


def _created(pipeline: Pipeline) -> tuple[datetime, str]:
    return pipeline.created_at, pipeline.id


def _pipeline_routes(app: FastAPI, pipelines: PipelineService) -> None:
    @app.post(
        "/v1/pipelines",
        response_model=PipelineOut,
        status_code=201,
        responses={200: {"model": PipelineOut, "description": "sent again with its Idempotency-Key"}},
    )
    def schedule(
        body: ScheduleBody,
        who: Actor,
        response: Response,
        idempotency_key: Annotated[str | None, Header(max_length=128)] = None,
    ) -> PipelineOut:
        """201 with the new pipeline; 200 with the first one for a create sent again with its key."""
        pipeline, created = pipelines.schedule(
            who,
            body.command(),
            confirm_live=body.confirm_live,
            slack_channel=body.slack_channel,
            idempotency_key=idempotency_key,
            approved_by=body.approved_by,
            vouched=CREDENTIAL.get() == "service",
        )
        if not created:
            response.status_code = 200
        return pipeline_out(pipeline)

    @app.get("/v1/pipelines", response_model=PipelinePageOut)
    def list_pipelines(
        who: Actor,
        owner: Annotated[str | None, Query(max_length=64)] = None,
        state: Annotated[PipelineState | None, Query()] = None,
        limit: PageLimit = 50,
        cursor: PageCursor = None,
    ) -> PipelinePageOut:
        """Oldest first, a page at a time: `next_cursor` asks for the next (None: this was the last)."""
        found = pipelines.list(owner=owner, state=state)
        shown, next_cursor = page_oldest_first(found, _created, limit=limit, cursor=cursor)
        return PipelinePageOut(pipelines=[pipeline_out(p) for p in shown], next_cursor=next_cursor)

    @app.get("/v1/pipelines/{pipeline_id}", response_model=PipelineDetailOut)
    def get_pipeline(pipeline_id: str, who: Actor) -> PipelineDetailOut:
        return pipeline_detail_out(pipelines.detail(pipeline_id))

    @app.post("/v1/pipelines/{pipeline_id}/pause", response_model=PipelineOut)
    def pause(pipeline_id: str, who: Actor) -> PipelineOut:
        return pipeline_out(pipelines.pause(who, pipeline_id))

    @app.post("/v1/pipelines/{pipeline_id}/resume", response_model=PipelineOut)
    def resume(pipeline_id: str, who: Actor, body: ResumeBody | None = None) -> PipelineOut:
        """A live pipeline of a two-owner source resumes only with a second owner's approval."""
        approved_by = body.approved_by if body is not None else None
        vouched = CREDENTIAL.get() == "service"
        return pipeline_out(pipelines.resume(who, pipeline_id, approved_by=approved_by, vouched=vouched))

    @app.post("/v1/pipelines/{pipeline_id}/run", response_model=PipelineOut)
    def run_now(pipeline_id: str, who: Actor) -> PipelineOut:
        return pipeline_out(pipelines.run_now(who, pipeline_id))

    @app.post("/v1/pipelines/{pipeline_id}/unschedule", response_model=PipelineOut)
    def unschedule(pipeline_id: str, body: UnscheduleBody, who: Actor) -> PipelineOut:
        return pipeline_out(pipelines.unschedule(who, pipeline_id, confirm=body.confirm))


def _janitor_routes(app: FastAPI, janitor: Janitor) -> None:
    @app.get("/v1/idle-pipelines", response_model=IdlePipelinePageOut)
    def idle(who: Actor, limit: PageLimit = 50, cursor: PageCursor = None) -> IdlePipelinePageOut:
        """Oldest first, a page at a time, each with its deadline."""
        found = janitor.idle_pipelines()
        shown, next_cursor = page_oldest_first(
            found, lambda item: _created(item[0]), limit=limit, cursor=cursor
        )
        return IdlePipelinePageOut(
            pipelines=[idle_pipeline_out(p, deadline) for p, deadline in shown], next_cursor=next_cursor
        )

    @app.post("/v1/pipelines/{pipeline_id}/keep", response_model=PipelineOut)
    def keep(pipeline_id: str, body: KeepBody, who: Actor) -> PipelineOut:
        return pipeline_out(janitor.keep(who, pipeline_id, body.days))

    @app.post("/v1/pipelines/{pipeline_id}/delete", response_model=PipelineOut)
    def delete_now(pipeline_id: str, body: DeleteBody, who: Actor) -> PipelineOut:
        """409 unless the pipeline is in its idle period and `confirm` is true."""
        return pipeline_out(janitor.delete_now(who, pipeline_id, confirm=body.confirm))


def _group_routes(app: FastAPI, groups: ConsumerGroups, slow: SlowCalls) -> None:
    @app.get("/v1/groups/{group}/lag", response_model=LagOut)
    async def lag(
        group: str,
        who: Actor,
        topic: Annotated[str | None, Query(max_length=249)] = None,
        sample_s: Annotated[float | None, Query(ge=0, le=30)] = None,
        cluster: Annotated[str | None, Query(max_length=32)] = None,
    ) -> LagOut:
        """Per-partition lag, the hottest partition, members, and the drain over two samples.

        Async: each sample reads Kafka on a worker thread, the wait between them holds none."""
        asked = LagCommand(group, topic, cluster)  # the grammar's rules for a group, topic and cluster
        with slow.held(who, "ask for the lag again"):
            sampling = await run_in_threadpool(
                groups.begin_lag, asked.group, asked.topic, sample_s=sample_s, cluster=asked.cluster
            )
            await asyncio.sleep(sampling.wait_s)
            return lag_out(await run_in_threadpool(groups.finish_lag, sampling))

    @app.post("/v1/groups/{group}/rewind", response_model=RewindOut)
    def rewind(
        group: str,
        body: RewindBody,
        who: Actor,
        idempotency_key: Annotated[str | None, Header(max_length=128)] = None,
    ) -> RewindOut:
        """Preview (the default) or apply (`preview: false`) a move of the group's offsets on a topic."""
        command = body.command(group)
        with slow.held(who, "ask for the rewind again"):
            outcome = groups.rewind(who, command, apply=not body.preview, idempotency_key=idempotency_key)
        return rewind_out(outcome)
