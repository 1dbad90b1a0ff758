"""`DaemonClient`: the Replay Service's HTTP API as Python calls, for the CLI and the Slack app.

HTTP failures are translated here into the same domain errors the service raises, so the edges
(an ephemeral Slack reply, a CLI exit code) handle a refusal the same way whether it was local or remote.
"""

from __future__ import annotations

from typing import Any

import httpx

from daemon.core.errors import BadRequest, Conflict, Forbidden, NotFound, ReplayError, Unavailable

_BY_STATUS: dict[int, type[ReplayError]] = {
    400: BadRequest,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: BadRequest,
    503: Unavailable,
}


class DaemonClient:
    def __init__(
        self,
        *,
        base_url: str,
        token: str,
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
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

    def _call(
        self,
        method: str,
        path: str,
        *,
        actor: str,
        json: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        try:
            response = self._http.request(
                method,
                path,
                json=json,
                params={k: v for k, v in (params or {}).items() if v is not None},
                headers={"X-Replay-Actor": actor, **(headers or {})},
            )
        except httpx.TimeoutException as exc:
            raise Unavailable(f"the Replay Service at {self._base_url} did not answer in time") from exc
        except httpx.TransportError as exc:
            raise Unavailable(f"the Replay Service at {self._base_url} is not reachable ({exc})") from exc
        if response.is_success:
            return response.json()
        try:
            message = response.json().get("error") or response.text
        except ValueError:
            message = response.text
        if response.status_code == 401:
            raise Forbidden(f"the Replay Service refused our credentials: {message}")
        if response.status_code >= 500 and response.status_code != 503:
            raise Unavailable(f"the Replay Service failed ({response.status_code}): {message}")
        raise _BY_STATUS.get(response.status_code, BadRequest)(message)

    def plan(self, actor: str, request: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/plans", actor=actor, json=request)

    def create_replay(
        self, actor: str, request: dict[str, Any], *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._call("POST", "/v1/replays", actor=actor, json=request, headers=headers)

    def get_replay(self, actor: str, run_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/replays/{run_id}", actor=actor)

    def list_replays(
        self,
        actor: str,
        *,
        state: str | None = None,
        requester: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        params = {"state": state, "requester": requester, "limit": limit, "cursor": cursor}
        return self._call("GET", "/v1/replays", actor=actor, params=params)

    def cancel_replay(self, actor: str, run_id: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/replays/{run_id}/cancel", actor=actor)

    def sources(self, actor: str) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/sources", actor=actor)["sources"]

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/healthz", actor="-")

    def schedule(self, actor: str, request: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/pipelines", actor=actor, json=request)

    def list_pipelines(self, actor: str, *, owner: str | None = None, state: str | None = None) -> list[Any]:
        return self._call("GET", "/v1/pipelines", actor=actor, params={"owner": owner, "state": state})

    def get_pipeline(self, actor: str, pipeline_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/pipelines/{pipeline_id}", actor=actor)

    def pipeline_action(
        self, actor: str, pipeline_id: str, action: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """`pause`, `resume`, `run` (now), `unschedule` (`{"confirm": true}`), `keep` (`{"days": N}`),
        or `delete` (de-provision now)."""
        return self._call("POST", f"/v1/pipelines/{pipeline_id}/{action}", actor=actor, json=body)

    def idle_pipelines(self, actor: str) -> list[Any]:
        return self._call("GET", "/v1/idle-pipelines", actor=actor)
