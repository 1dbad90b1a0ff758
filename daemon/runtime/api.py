"""The Replay Service's HTTP API (FastAPI). Thin: parse, call the service, translate errors.

Every /v1 call carries a bearer token (compared in constant time) and the acting user's id in
`X-Replay-Actor`. Domain errors become 4xx/503 with `{"error": "<message a person can act on>"}`.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field

from daemon.core.errors import BadRequest, ReplayError
from daemon.core.grammar import PlanCommand, ReplayCommand, ScheduleCommand, parse_cron
from daemon.core.quantities import parse_duration
from daemon.core.states import PipelineState, RunState
from daemon.core.windows import parse_window
from daemon.runtime.metrics import render_metrics
from daemon.usecases.janitor import Janitor
from daemon.usecases.pipeline_service import PipelineService
from daemon.usecases.replays import Plan, ReplayService
from store.models import Pipeline, Run


class _Unauthorized(Exception):
    """Raised by the auth dependency; answered with 401 (not a domain error: no details leak)."""


class ReplayBody(BaseModel):
    """A replay or plan request: the same fields as the `/replay` command."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1, max_length=63)
    window: str = Field(min_length=1, max_length=80, examples=["2024-01-01..2024-01-07", "last=6h"])
    tps: int | None = Field(default=None, description="events per second across the whole job")
    topic: Literal["auto", "live"] = "auto"
    headers: dict[str, str] = Field(default_factory=dict)
    workers: int | None = Field(default=None, ge=1, le=512)
    ordering: Literal["entity", "none"] = "entity"
    confirm_live: bool = False
    slack_channel: str | None = Field(default=None, max_length=64)

    def command(self, kind: type[ReplayCommand] | type[PlanCommand]) -> ReplayCommand | PlanCommand:
        return kind(
            source=self.source,
            window=parse_window(self.window),
            tps=self.tps,
            topic=self.topic,
            headers=tuple(sorted(self.headers.items())),
            workers=self.workers,
            ordering=self.ordering,
        )


class RunOut(BaseModel):
    id: str
    kind: str
    state: str
    source: str
    window: str | None
    topic: str
    tps: int
    requester: str
    rows: int | None
    confirmed: int
    achieved_tps: float | None
    failed_tasks: int
    duplicates: int
    failure_reason: str | None
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    slack_channel: str | None
    slack_ts: str | None

    @classmethod
    def of(cls, run: Run) -> RunOut:
        return cls(
            id=run.id,
            kind=str(run.kind),
            state=str(run.state),
            source=run.source,
            window=run.window_label,
            topic=run.target_topic,
            tps=run.tps,
            requester=run.requester,
            rows=run.rows_selected if run.rows_selected is not None else (run.options or {}).get("rows"),
            confirmed=run.confirmed_count,
            achieved_tps=run.achieved_tps,
            failed_tasks=run.failed_tasks,
            duplicates=run.duplicates_reported,
            failure_reason=run.failure_reason,
            created_at=run.created_at,
            started_at=run.started_at,
            ended_at=run.ended_at,
            slack_channel=run.slack_channel,
            slack_ts=run.slack_ts,
        )


class RunCreated(RunOut):
    created: bool


class RunPageOut(BaseModel):
    runs: list[RunOut]
    next_cursor: str | None


class ScheduleBody(BaseModel):
    """A scheduled pipeline: the same fields as `/replay schedule`."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1, max_length=63)
    every: str | None = Field(default=None, max_length=20, examples=["15m", "1h", "1d"])
    cron: str | None = Field(default=None, max_length=120, examples=["*/15 * * * *"])
    watermark: str = Field(min_length=1, max_length=128)
    tps: int | None = None
    topic: Literal["auto", "live"] = "auto"
    lookback: str | None = Field(default=None, max_length=20, examples=["1h"])
    headers: dict[str, str] = Field(default_factory=dict)
    idle_after_days: int | None = Field(default=None, ge=1, le=3660)
    confirm_live: bool = False
    slack_channel: str | None = Field(default=None, max_length=64)

    def command(self) -> ScheduleCommand:
        return ScheduleCommand(
            source=self.source,
            every_seconds=_option("every", self.every, lambda v: parse_duration(v, minimum=60)),
            cron=_option("cron", self.cron, parse_cron),
            watermark=self.watermark,
            tps=self.tps,
            topic=self.topic,
            lookback_seconds=_option("lookback", self.lookback, parse_duration) or 0,
            headers=tuple(sorted(self.headers.items())),
            idle_after_days=self.idle_after_days,
        )


def _option(name: str, value: str | None, parse: Callable[[str], Any]) -> Any:
    """Parse one option's text; an error names the option as the user wrote it (`every=0m`)."""
    if value is None:
        return None
    try:
        return parse(value)
    except BadRequest as exc:
        reason = getattr(exc, "reason", str(exc))
        raise BadRequest(f"`{name}={value}`: {reason}") from None


class PipelineOut(BaseModel):
    id: str
    source: str
    schedule: str
    state: str
    watermark_column: str
    watermark: str | None
    lookback_seconds: int
    tps: int
    topic: str
    owners: list[str]
    next_run_at: datetime | None
    last_published_at: datetime | None
    created_at: datetime
    slack_channel: str | None
    slack_ts: str | None

    @classmethod
    def of(cls, pipeline: Pipeline) -> PipelineOut:
        return cls(
            id=pipeline.id,
            source=pipeline.source,
            schedule=pipeline.schedule,
            state=str(pipeline.state),
            watermark_column=pipeline.watermark_column,
            watermark=pipeline.watermark_value,
            lookback_seconds=pipeline.lookback_seconds,
            tps=pipeline.tps,
            topic=pipeline.topic,
            owners=list(pipeline.owners),
            next_run_at=pipeline.next_run_at,
            last_published_at=pipeline.last_published_at,
            created_at=pipeline.created_at,
            slack_channel=pipeline.slack_channel,
            slack_ts=pipeline.slack_ts,
        )


class PipelineDetailOut(PipelineOut):
    runs: list[RunOut]


class KeepBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    days: int | None = Field(default=None, ge=1, le=365)


class IdlePipelineOut(PipelineOut):
    deadline: datetime


class UnscheduleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    confirm: bool = False


class SourceOut(BaseModel):
    name: str
    description: str
    live_topic: str | None
    owners: list[str]
    partition_column: str
    watermark_column: str | None


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message})


def _validation_message(exc: RequestValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error.get("loc", ()) if part not in ("body", "query", "path"))
        if error.get("type") == "extra_forbidden":
            problems.append(f"unknown option '{where}'")
        else:
            problems.append(f"{where or 'request'}: {error.get('msg')}")
    return "; ".join(problems) or "invalid request"


def _actor(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    x_replay_actor: Annotated[str | None, Header(max_length=64)] = None,
) -> str:
    """Authenticate the caller (constant-time compare) and name the person it acts for."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.encode(), request.app.state.api_token):
        raise _Unauthorized()
    if not x_replay_actor:
        raise BadRequest("missing X-Replay-Actor header (the acting user's id)")
    return x_replay_actor


Actor = Annotated[str, Depends(_actor)]


def create_api(
    service: ReplayService,
    *,
    api_token: str,
    pipelines: PipelineService | None = None,
    janitor: Janitor | None = None,
    metrics: Any = render_metrics,
) -> FastAPI:
    app = FastAPI(title="Replay Service", version="1", summary="Replay lake tables into Kafka at a set rate")
    app.state.api_token = api_token.encode()

    @app.exception_handler(ReplayError)
    async def _domain_error(_request: Request, exc: ReplayError) -> JSONResponse:
        return _error(exc.http_status, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(422, _validation_message(exc))

    @app.exception_handler(_Unauthorized)
    async def _unauthorized(_request: Request, _exc: _Unauthorized) -> JSONResponse:
        response = _error(401, "missing or invalid bearer token")
        response.headers["WWW-Authenticate"] = "Bearer"
        return response

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics_endpoint() -> PlainTextResponse:
        body, content_type = metrics(service)
        return PlainTextResponse(body, media_type=content_type)

    @app.post("/v1/plans", response_model=Plan)
    def plan(body: ReplayBody, who: Actor) -> Plan:
        return service.plan(who, body.command(PlanCommand))  # type: ignore[arg-type]

    @app.post("/v1/replays", response_model=RunCreated, status_code=201)
    def create(
        body: ReplayBody,
        who: Actor,
        idempotency_key: Annotated[str | None, Header(max_length=128)] = None,
    ) -> RunCreated:
        command = body.command(ReplayCommand)
        run, created = service.create_replay(
            who,
            command,  # type: ignore[arg-type]
            confirm_live=body.confirm_live,
            idempotency_key=idempotency_key,
            slack_channel=body.slack_channel,
        )
        return RunCreated(**RunOut.of(run).model_dump(), created=created)

    @app.get("/v1/replays/{run_id}", response_model=RunOut)
    def get(run_id: str, who: Actor) -> RunOut:
        return RunOut.of(service.get(run_id))

    @app.get("/v1/replays", response_model=RunPageOut)
    def list_runs(
        who: Actor,
        state: Annotated[RunState | None, Query()] = None,
        requester: Annotated[str | None, Query(max_length=64)] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 20,
        cursor: Annotated[str | None, Query(max_length=200)] = None,
    ) -> RunPageOut:
        runs, next_cursor = service.list(state=state, requester=requester, limit=limit, cursor=cursor)
        return RunPageOut(runs=[RunOut.of(run) for run in runs], next_cursor=next_cursor)

    @app.post("/v1/replays/{run_id}/cancel", response_model=RunOut)
    def cancel(run_id: str, who: Actor) -> RunOut:
        return RunOut.of(service.cancel(who, run_id))

    @app.get("/v1/sources")
    def sources(who: Actor) -> dict[str, list[SourceOut]]:
        return {
            "sources": [
                SourceOut(
                    name=s.name,
                    description=s.description,
                    live_topic=s.live_topic,
                    owners=list(s.owners),
                    partition_column=s.partition_column,
                    watermark_column=s.watermark_column,
                )
                for s in service.sources()
            ]
        }

    if pipelines is not None:
        _pipeline_routes(app, pipelines)
    if janitor is not None:
        _janitor_routes(app, janitor)
    return app


def _pipeline_routes(app: FastAPI, pipelines: PipelineService) -> None:
    @app.post("/v1/pipelines", response_model=PipelineOut, status_code=201)
    def schedule(body: ScheduleBody, who: Actor) -> PipelineOut:
        pipeline = pipelines.schedule(
            who, body.command(), confirm_live=body.confirm_live, slack_channel=body.slack_channel
        )
        return PipelineOut.of(pipeline)

    @app.get("/v1/pipelines", response_model=list[PipelineOut])
    def list_pipelines(
        who: Actor,
        owner: Annotated[str | None, Query(max_length=64)] = None,
        state: Annotated[PipelineState | None, Query()] = None,
    ) -> list[PipelineOut]:
        return [PipelineOut.of(p) for p in pipelines.list(owner=owner, state=state)]

    @app.get("/v1/pipelines/{pipeline_id}", response_model=PipelineDetailOut)
    def get_pipeline(pipeline_id: str, who: Actor) -> PipelineDetailOut:
        detail = pipelines.detail(pipeline_id)
        return PipelineDetailOut(
            **PipelineOut.of(detail.pipeline).model_dump(), runs=[RunOut.of(r) for r in detail.runs]
        )

    @app.post("/v1/pipelines/{pipeline_id}/pause", response_model=PipelineOut)
    def pause(pipeline_id: str, who: Actor) -> PipelineOut:
        return PipelineOut.of(pipelines.pause(who, pipeline_id))

    @app.post("/v1/pipelines/{pipeline_id}/resume", response_model=PipelineOut)
    def resume(pipeline_id: str, who: Actor) -> PipelineOut:
        return PipelineOut.of(pipelines.resume(who, pipeline_id))

    @app.post("/v1/pipelines/{pipeline_id}/run", response_model=PipelineOut)
    def run_now(pipeline_id: str, who: Actor) -> PipelineOut:
        return PipelineOut.of(pipelines.run_now(who, pipeline_id))

    @app.post("/v1/pipelines/{pipeline_id}/unschedule", response_model=PipelineOut)
    def unschedule(pipeline_id: str, body: UnscheduleBody, who: Actor) -> PipelineOut:
        return PipelineOut.of(pipelines.unschedule(who, pipeline_id, confirm=body.confirm))


def _janitor_routes(app: FastAPI, janitor: Janitor) -> None:
    @app.get("/v1/idle-pipelines", response_model=list[IdlePipelineOut])
    def idle(who: Actor) -> list[IdlePipelineOut]:
        return [
            IdlePipelineOut(**PipelineOut.of(p).model_dump(), deadline=deadline)
            for p, deadline in janitor.idle_pipelines()
        ]

    @app.post("/v1/pipelines/{pipeline_id}/keep", response_model=PipelineOut)
    def keep(pipeline_id: str, body: KeepBody, who: Actor) -> PipelineOut:
        return PipelineOut.of(janitor.keep(who, pipeline_id, body.days))

    @app.post("/v1/pipelines/{pipeline_id}/delete", response_model=PipelineOut)
    def delete_now(pipeline_id: str, who: Actor) -> PipelineOut:
        return PipelineOut.of(janitor.delete_now(who, pipeline_id))
