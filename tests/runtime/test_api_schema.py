"""schemathesis against the daemon's own OpenAPI schema: whatever the input, never a 5xx.

Requests act as a user who owns nothing, so a generated request that happens to be valid is refused
(403) rather than launching a job.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.core.result import Err, Ok

from tests.fixtures.daemon import NO_JOBS, STRANGER, DaemonProcess

pytestmark = [pytest.mark.kafka, NO_JOBS]


def test_no_generated_request_makes_the_daemon_fail(replay_daemon: DaemonProcess) -> None:
    schema = schemathesis.openapi.from_url(f"{replay_daemon.url}/openapi.json")
    headers = {"Authorization": f"Bearer {replay_daemon.token}", "X-Replay-Actor": STRANGER}
    results = list(schema.get_all_operations())
    assert not [result.err() for result in results if isinstance(result, Err)]
    operations = [result.ok() for result in results if isinstance(result, Ok)]
    assert len(operations) >= 8

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def no_server_error(case: Any) -> None:
            response = case.call(headers=headers)
            assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.text}"
            if response.status_code >= 400:
                assert response.json()["error"]

        no_server_error()
