"""`DaemonClient`: the Replay Service's HTTP API as typed Python calls, for the CLI and the Slack app.

Every call sends a request model and returns an answer model of `daemon.contract.models`, so nothing
untyped crosses between a client and the daemon. HTTP failures are translated here into the same domain
errors the service raises, so the edges (an ephemeral Slack reply, a CLI exit code) handle a refusal the
same way whether it was local or remote.

Creating calls (a replay, a pipeline, an applied rewind) carry an Idempotency-Key, and only those are
retried, by the client's declared policy `KEYED_RETRY`: a timeout leaves the caller unsure whether the
thing exists, and asking again with the same key answers that (the daemon gives back the first one)
without making a second. A call without a key is never retried.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from daemon.contract.groups import LagOut, RewindBody, RewindOut
from daemon.contract.models import (
    DeleteBody,
    HealthOut,
    IdlePipelineOut,
    IdlePipelinePageOut,
    KeepBody,
    ListedIdOut,
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
    SourceOut,
    SourcesOut,
    TpsBody,
    UnscheduleBody,
    VerdictIdsOut,
    WhoAmIOut,
)
from daemon.core.errors import (
    BadRequest,
    CapReached,
    Conflict,
    DependencyDown,
    Forbidden,
    NotFound,
    ReplayError,
    Unavailable,
)
from daemon.core.retry import RetryPolicy, Sleep

# An unreachable or timed-out daemon is worth one more try with the same key; a daemon that answered
# "a dependency is down" has answered (asking again at once finds the same), as has any refusal.
KEYED_RETRY = RetryPolicy(attempts=2, pause_s=1.0, transient=(Unavailable,), permanent=(DependencyDown,))

Model = TypeVar("Model")
_Paged = TypeVar("_Paged", PipelinePageOut, IdlePipelinePageOut)
PipelineAction = Literal["pause", "resume", "run"]

_BY_STATUS: dict[int, type[ReplayError]] = {
    400: BadRequest,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: BadRequest,
    429: CapReached,
    503: Unavailable,
}
_PLAN = TypeAdapter(PlanOut)
_CREATED = TypeAdapter(RunCreated)
_RUN = TypeAdapter(RunOut)
_VERDICT_IDS = TypeAdapter(VerdictIdsOut)
_RUN_PAGE = TypeAdapter(RunPageOut)
_SERIES = TypeAdapter(RateSeriesOut)
_SOURCES = TypeAdapter(SourcesOut)
_HEALTH = TypeAdapter(HealthOut)
_WHOAMI = TypeAdapter(WhoAmIOut)
_PAGE_LINK = TypeAdapter(PageLinkOut)
_PIPELINE = TypeAdapter(PipelineOut)
_PIPELINE_DETAIL = TypeAdapter(PipelineDetailOut)
_PIPELINE_PAGE = TypeAdapter(PipelinePageOut)
_IDLE_PIPELINE_PAGE = TypeAdapter(IdlePipelinePageOut)
_ALL = 200  # a page's most: lists the bot and the CLI show whole are read page by page
_LAG = TypeAdapter(LagOut)
_REWIND = TypeAdapter(RewindOut)


class DaemonClient:
    def __init__(
        self,
        *,
        base_url: str,
        token: str,
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        keyed_retry: RetryPolicy = KEYED_RETRY,
        sleep: Sleep = time.sleep,
    ) -> None:
        self._keyed_retry = keyed_retry
        self._sleep = sleep
        self._base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self._base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> DaemonClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _pages(
        self, adapter: TypeAdapter[_Paged], path: str, actor: str, params: dict[str, Any]
    ) -> Iterator[_Paged]:
        """Every page of a list, in order: what the bot and the CLI show whole."""
        cursor: str | None = None
        while True:
            page = self._call(
                adapter, "GET", path, actor=actor, params={**params, "limit": _ALL, "cursor": cursor}
            )
            yield page
            if (cursor := page.next_cursor) is None:
                return

    def _keyed(self, idempotency_key: str | None, work: Callable[[], Model]) -> Model:
        """``work()``, retried by ``KEYED_RETRY`` when the call carries a key (and only then)."""
        if idempotency_key is None:
            return work()
        return self._keyed_retry.call(work, sleep=self._sleep)

    def _call(
        self,
        answer: TypeAdapter[Model],
        method: str,
        path: str,
        *,
        actor: str,
        body: BaseModel | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Model:
        response = self._send(method, path, actor=actor, body=body, params=params, headers=headers)
        try:
            return answer.validate_json(response.content)
        except ValidationError as exc:
            raise Unavailable(f"the Replay Service answered {path} in an unknown shape: {exc}") from exc

    def _send(
        self,
        method: str,
        path: str,
        *,
        actor: str,
        body: BaseModel | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One request; a successful answer, or the domain error its status and message say."""
        try:
            response = self._http.request(
                method,
                path,
                json=body.model_dump(mode="json", exclude_none=True) if body is not None else None,
                params={k: v for k, v in (params or {}).items() if v is not None},
                headers={"X-Replay-Actor": actor, **(headers or {})},
            )
        except httpx.TimeoutException as exc:
            raise Unavailable(f"the Replay Service at {self._base_url} did not answer in time") from exc
        except httpx.TransportError as exc:
            raise Unavailable(f"the Replay Service at {self._base_url} is not reachable ({exc})") from exc
        if response.is_success:
            return response
        try:
            answer = response.json()
            message = answer.get("error") or response.text
        except (ValueError, AttributeError):
            answer, message = {}, response.text
        if response.status_code == 503 and answer.get("dependency"):  # the daemon is up, that is not
            raise DependencyDown(str(answer["dependency"]), str(answer.get("where") or "?"), message)
        if response.status_code == 401:
            raise Forbidden(f"the Replay Service refused our credentials: {message}")
        if response.status_code >= 500 and response.status_code != 503:
            raise Unavailable(f"the Replay Service failed ({response.status_code}): {message}")
        raise _BY_STATUS.get(response.status_code, BadRequest)(message)

    def plan(self, actor: str, request: ReplayBody) -> PlanOut:
        return self._call(_PLAN, "POST", "/v1/plans", actor=actor, body=request)

    def create_replay(
        self, actor: str, request: ReplayBody, *, idempotency_key: str | None = None
    ) -> RunCreated:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._keyed(
            idempotency_key,
            lambda: self._call(_CREATED, "POST", "/v1/replays", actor=actor, body=request, headers=headers),
        )

    def get_replay(self, actor: str, run_id: str) -> RunOut:
        return self._call(_RUN, "GET", f"/v1/replays/{run_id}", actor=actor)

    def verdict_ids(self, actor: str, run_id: str, kind: str, *, after: int = -1) -> list[ListedIdOut]:
        """Every id of one of the run's verdict lists (missing, unexpected, duplicated), page by page."""
        found: list[ListedIdOut] = []
        while True:
            page = self._call(
                _VERDICT_IDS, "GET", f"/v1/replays/{run_id}/ids/{kind}", actor=actor, params={"after": after}
            )
            found += page.ids
            if page.next_after is None:
                return found
            after = page.next_after

    def list_replays(
        self,
        actor: str,
        *,
        state: str | None = None,
        requester: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> RunPageOut:
        params = {"state": state, "requester": requester, "limit": limit, "cursor": cursor}
        return self._call(_RUN_PAGE, "GET", "/v1/replays", actor=actor, params=params)

    def cancel_replay(self, actor: str, run_id: str) -> RunOut:
        return self._call(_RUN, "POST", f"/v1/replays/{run_id}/cancel", actor=actor)

    def set_tps(self, actor: str, run_id: str, tps: int) -> RunOut:
        """Change a running run's rate (it takes effect a moment later, on every task)."""
        return self._call(_RUN, "POST", f"/v1/replays/{run_id}/tps", actor=actor, body=TpsBody(tps=tps))

    def pause_replay(self, actor: str, run_id: str) -> RunOut:
        return self._call(_RUN, "POST", f"/v1/replays/{run_id}/pause", actor=actor)

    def resume_replay(self, actor: str, run_id: str) -> RunOut:
        return self._call(_RUN, "POST", f"/v1/replays/{run_id}/resume", actor=actor)

    def repair(self, actor: str, run_id: str, request: RepairBody) -> RunCreated:
        """Publish only the ids the run's reconcile found missing; returns the repair run."""
        return self._call(_CREATED, "POST", f"/v1/replays/{run_id}/repair", actor=actor, body=request)

    def redrive(self, actor: str, run_id: str, request: RepairBody) -> RunCreated:
        """Send the run's dead letters back to its topic; returns the redrive run."""
        return self._call(_CREATED, "POST", f"/v1/replays/{run_id}/redrive", actor=actor, body=request)

    def reconcile(self, actor: str, run_id: str) -> RunOut:
        """Queue a reconcile of a finished run; returns the reconcile run."""
        return self._call(_RUN, "POST", f"/v1/replays/{run_id}/reconcile", actor=actor)

    def rate_series(self, actor: str, run_id: str) -> RateSeriesOut:
        return self._call(_SERIES, "GET", f"/v1/replays/{run_id}/series", actor=actor)

    def chart_png(self, actor: str, run_id: str) -> bytes:
        """The run's rate chart, a PNG rendered by the daemon (the CLI needs no plotting library)."""
        return self._send("GET", f"/v1/replays/{run_id}/chart.png", actor=actor).content

    def sources(self, actor: str) -> list[SourceOut]:
        return self._call(_SOURCES, "GET", "/v1/sources", actor=actor).sources

    def page_link(self, actor: str, run_id: str | None = None) -> PageLinkOut:
        """A link that signs `actor` in to the pages: a run's page, or the console."""
        return self._call(_PAGE_LINK, "POST", "/v1/page-links", actor=actor, body=PageLinkBody(run_id=run_id))

    def whoami(self, actor: str = "") -> WhoAmIOut:
        """Whom this client's token acts for: a personal token's owner, or `service`'s named actor."""
        return self._call(_WHOAMI, "GET", "/v1/whoami", actor=actor)

    def health(self) -> HealthOut:
        return self._call(_HEALTH, "GET", "/healthz", actor="-")

    def schedule(
        self, actor: str, request: ScheduleBody, *, idempotency_key: str | None = None
    ) -> PipelineOut:
        """The new pipeline, or the one an earlier create with this key made (a safe retry)."""
        return self.schedule_once(actor, request, idempotency_key=idempotency_key)[0]

    def schedule_once(
        self, actor: str, request: ScheduleBody, *, idempotency_key: str | None
    ) -> tuple[PipelineOut, bool]:
        """`schedule`, and whether this call created the pipeline (False: the key's first create did)."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        response = self._keyed(
            idempotency_key,
            lambda: self._send("POST", "/v1/pipelines", actor=actor, body=request, headers=headers),
        )
        try:
            pipeline = _PIPELINE.validate_json(response.content)
        except ValidationError as exc:
            raise Unavailable(f"the Replay Service answered a create in an unknown shape: {exc}") from exc
        return pipeline, response.status_code == 201

    def list_pipelines(
        self, actor: str, *, owner: str | None = None, state: str | None = None
    ) -> list[PipelineOut]:
        pages = self._pages(_PIPELINE_PAGE, "/v1/pipelines", actor, {"owner": owner, "state": state})
        return [pipeline for page in pages for pipeline in page.pipelines]

    def get_pipeline(self, actor: str, pipeline_id: str) -> PipelineDetailOut:
        return self._call(_PIPELINE_DETAIL, "GET", f"/v1/pipelines/{pipeline_id}", actor=actor)

    def pipeline_action(
        self, actor: str, pipeline_id: str, action: PipelineAction, *, approved_by: str | None = None
    ) -> PipelineOut:
        """`pause`, `resume` or `run` (now); `approved_by` on a resume the second owner approved."""
        body = ResumeBody(approved_by=approved_by) if approved_by is not None else None
        return self._call(_PIPELINE, "POST", f"/v1/pipelines/{pipeline_id}/{action}", actor=actor, body=body)

    def unschedule(self, actor: str, pipeline_id: str, *, confirm: bool) -> PipelineOut:
        """Stop a pipeline for good; the daemon refuses without `confirm`."""
        body = UnscheduleBody(confirm=confirm)
        path = f"/v1/pipelines/{pipeline_id}/unschedule"
        return self._call(_PIPELINE, "POST", path, actor=actor, body=body)

    def delete_now(self, actor: str, pipeline_id: str, *, confirm: bool) -> PipelineOut:
        """De-provision an idle pipeline now; the daemon refuses without `confirm` or if it is not idle."""
        body = DeleteBody(confirm=confirm)
        return self._call(_PIPELINE, "POST", f"/v1/pipelines/{pipeline_id}/delete", actor=actor, body=body)

    def keep(self, actor: str, pipeline_id: str, days: int | None = None) -> PipelineOut:
        """Keep an idle pipeline for `days` more days (None: the platform's default)."""
        path = f"/v1/pipelines/{pipeline_id}/keep"
        return self._call(_PIPELINE, "POST", path, actor=actor, body=KeepBody(days=days))

    def idle_pipelines(self, actor: str) -> list[IdlePipelineOut]:
        pages = self._pages(_IDLE_PIPELINE_PAGE, "/v1/idle-pipelines", actor, {})
        return [pipeline for page in pages for pipeline in page.pipelines]

    def group_lag(
        self,
        actor: str,
        group: str,
        *,
        topic: str | None = None,
        sample_s: float | None = None,
        cluster: str | None = None,
    ) -> LagOut:
        """A consumer group's lag (two samples `sample_s` apart; None: the daemon's setting), on
        `cluster` (None: the topic's source's, else the default)."""
        params = {"topic": topic, "sample_s": sample_s, "cluster": cluster}
        return self._call(_LAG, "GET", f"/v1/groups/{group}/lag", actor=actor, params=params)

    def rewind(
        self, actor: str, group: str, request: RewindBody, *, idempotency_key: str | None = None
    ) -> RewindOut:
        """Preview a rewind of a consumer group (`request.preview`), or apply it."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        path = f"/v1/groups/{group}/rewind"
        return self._keyed(
            idempotency_key,
            lambda: self._call(_REWIND, "POST", path, actor=actor, body=request, headers=headers),
        )
