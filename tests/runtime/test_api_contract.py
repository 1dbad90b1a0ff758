"""The API as the ecosystem reads it: a valid OpenAPI document, a bearer security scheme generated
clients send, one error shape for every error (declared, and answered), pages on every list."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openapi_spec_validator import validate

from daemon.contract.models import ErrorOut
from store.pagination import page_oldest_first
from tests.fixtures.daemon import NO_JOBS, OWNER, DaemonProcess

pytestmark = [NO_JOBS]

ERROR_REF = "#/components/schemas/ErrorOut"
LISTS = ("/v1/replays", "/v1/pipelines", "/v1/idle-pipelines")


@pytest.fixture(scope="module")
def document(replay_daemon: DaemonProcess) -> dict[str, Any]:
    answer = httpx.get(f"{replay_daemon.url}/openapi.json", timeout=10)
    answer.raise_for_status()
    return dict(answer.json())


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]


@pytest.mark.kafka
def test_the_document_is_valid_openapi(document: dict[str, Any]) -> None:
    validate(cast(Mapping[Hashable, Any], document))  # raises with the first violation


@pytest.mark.kafka
def test_every_v1_operation_declares_the_bearer_scheme_and_no_authorization_parameter(
    document: dict[str, Any],
) -> None:
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "the service token (with X-Replay-Actor) or a personal token (`replayd token <user>`)",
    }
    for path, method, operation in _operations(document):
        if not path.startswith("/v1/"):
            continue
        assert {"bearer": []} in operation.get("security", []), (method, path)
        names = {p["name"].lower() for p in operation.get("parameters", [])}
        assert "authorization" not in names, (method, path)  # the specification ignores such a header


@pytest.mark.kafka
def test_every_operation_declares_the_one_error_shape(document: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in document["components"]["schemas"]  # FastAPI's `detail` shape
    for path, method, operation in _operations(document):
        for status in ("401", "404", "405", "422", "503"):
            declared = operation["responses"][status]["content"]["application/json"]["schema"]
            assert declared == {"$ref": ERROR_REF}, (method, path, status)


@pytest.mark.kafka
def test_declared_success_codes_are_the_ones_answered(document: dict[str, Any]) -> None:
    create_pipeline = document["paths"]["/v1/pipelines"]["post"]["responses"]
    assert {"200", "201"} <= set(create_pipeline)  # 200: the first pipeline, for a key sent again
    assert "201" in document["paths"]["/v1/replays"]["post"]["responses"]


@pytest.mark.kafka
def test_every_list_is_paged(document: dict[str, Any]) -> None:
    for path in LISTS:
        operation = document["paths"][path]["get"]
        names = {p["name"] for p in operation["parameters"]}
        assert {"limit", "cursor"} <= names, path
        schema_ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        schema = document["components"]["schemas"][schema_ref.rsplit("/", 1)[1]]
        assert "next_cursor" in schema["properties"], path


def _error(answer: httpx.Response, status: int) -> ErrorOut:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) <= {"error", "dependency", "where"}, body
    return ErrorOut.model_validate(body)


@pytest.mark.kafka
def test_one_route_of_each_kind_answers_the_declared_error_shape(replay_daemon: DaemonProcess) -> None:
    url = replay_daemon.url
    auth = {"Authorization": f"Bearer {replay_daemon.token}", "X-Replay-Actor": OWNER}
    with httpx.Client(base_url=url, headers=auth, timeout=10) as http:
        assert "no such route" in _error(http.get("/v1/nothing-here"), 404).error
        assert "method" in _error(http.delete("/v1/sources"), 405).error
        assert "window" in _error(http.post("/v1/plans", json={"source": "orders"}), 422).error
        assert "r-000000000000" in _error(http.get("/v1/replays/r-000000000000"), 404).error
        page = http.get("/v1/pipelines", params={"limit": 1})
        assert page.status_code == 200 and set(page.json()) == {"pipelines", "next_cursor"}
        idle = http.get("/v1/idle-pipelines", params={"limit": 1})
        assert idle.status_code == 200 and set(idle.json()) == {"pipelines", "next_cursor"}
        assert "cursor" in _error(http.get("/v1/pipelines", params={"cursor": "not-a-cursor"}), 400).error
    assert "bearer" in _error(httpx.get(f"{url}/v1/sources", timeout=10), 401).error


_START = datetime(2024, 1, 1, tzinfo=UTC)


@given(
    count=st.integers(min_value=0, max_value=30),
    same=st.integers(min_value=1, max_value=4),
    limit=st.integers(min_value=1, max_value=7),
)
def test_pages_cover_every_row_once_in_order(count: int, same: int, limit: int) -> None:
    # rows created in the same instant are told apart by id, as the store orders them
    rows = sorted((_START + timedelta(seconds=i // same), f"p-{i:04d}") for i in range(count))
    seen: list[tuple[datetime, str]] = []
    cursor: str | None = None
    for _ in range(count + 2):
        shown, cursor = page_oldest_first(rows, lambda row: row, limit=limit, cursor=cursor)
        assert len(shown) <= limit
        seen.extend(shown)
        if cursor is None:
            break
    assert seen == rows
