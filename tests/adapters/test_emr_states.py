"""The EMR Serverless state tables, row by row, and that they cover every state the AWS API lists."""

from __future__ import annotations

import botocore.session
import pytest
from botocore.model import StringShape

from daemon.adapters.emr_states import (
    EmrApplicationState,
    EmrJobRunState,
    Teardown,
    UnknownEmrState,
    exit_outcome,
    is_terminal,
    job_state,
    teardown_step,
)
from daemon.usecases.ports import JobOutcome, JobState


def _api_enum(shape: str) -> set[str]:
    model = botocore.session.get_session().get_service_model("emr-serverless")
    found = model.shape_for(shape)
    assert isinstance(found, StringShape), found
    return set(found.enum)


@pytest.mark.parametrize(
    ("emr_state", "expected"),
    [
        ("SUBMITTED", JobState.PENDING),
        ("PENDING", JobState.PENDING),
        ("SCHEDULED", JobState.PENDING),
        ("QUEUED", JobState.PENDING),
        ("RUNNING", JobState.RUNNING),
        ("CANCELLING", JobState.RUNNING),
        ("SUCCESS", JobState.EXITED),
        ("FAILED", JobState.EXITED),
        ("CANCELLED", JobState.EXITED),
    ],
)
def test_job_run_state_maps_to_job_state(emr_state: str, expected: JobState) -> None:
    assert expected == job_state(emr_state)


def test_every_job_run_state_in_the_aws_api_is_mapped() -> None:
    assert _api_enum("JobRunState") == {state.value for state in EmrJobRunState}


@pytest.mark.parametrize("emr_state", ["EXPLODED", "", None, "running"])
def test_unknown_job_run_state_is_an_error_naming_it(emr_state: object) -> None:
    with pytest.raises(UnknownEmrState, match=repr(emr_state)):
        job_state(emr_state)


@pytest.mark.parametrize(
    ("emr_state", "terminal"),
    [
        ("SUBMITTED", False),
        ("PENDING", False),
        ("SCHEDULED", False),
        ("QUEUED", False),
        ("RUNNING", False),
        ("CANCELLING", False),
        ("SUCCESS", True),
        ("FAILED", True),
        ("CANCELLED", True),
    ],
)
def test_only_ended_runs_are_terminal(emr_state: str, terminal: bool) -> None:
    assert terminal == is_terminal(emr_state)


@pytest.mark.parametrize(
    ("emr_state", "details", "expected"),
    [
        ("FAILED", "Job failed, ExitCode: 1. OutOfMemoryError", "Job failed, ExitCode: 1. OutOfMemoryError"),
        ("FAILED", None, "EMR Serverless job run failed"),
        ("FAILED", "  ", "EMR Serverless job run failed"),
        ("CANCELLED", "Job run timed out", "Job run timed out"),
        ("CANCELLED", None, "EMR Serverless job run cancelled"),
    ],
)
def test_a_run_that_ended_without_a_line_fails_with_its_state_details(
    emr_state: str, details: str | None, expected: str
) -> None:
    assert JobOutcome(succeeded=False, payload={"reason": expected}) == exit_outcome(emr_state, details)


@pytest.mark.parametrize(
    "emr_state", ["SUBMITTED", "PENDING", "SCHEDULED", "QUEUED", "RUNNING", "CANCELLING", "SUCCESS"]
)
def test_no_fallback_outcome_while_running_or_after_success(emr_state: str) -> None:
    assert exit_outcome(emr_state, "whatever") is None


@pytest.mark.parametrize(
    ("app_state", "expected"),
    [
        ("CREATING", Teardown.WAIT),
        ("CREATED", Teardown.DELETE),
        ("STARTING", Teardown.WAIT),
        ("STARTED", Teardown.STOP),
        ("STOPPING", Teardown.WAIT),
        ("STOPPED", Teardown.DELETE),
        ("TERMINATED", Teardown.GONE),
    ],
)
def test_application_state_decides_the_teardown_step(app_state: str, expected: Teardown) -> None:
    assert expected == teardown_step(app_state)


def test_every_application_state_in_the_aws_api_is_mapped() -> None:
    assert _api_enum("ApplicationState") == {state.value for state in EmrApplicationState}


def test_unknown_application_state_is_an_error() -> None:
    with pytest.raises(UnknownEmrState, match="application state 'HIBERNATING'"):
        teardown_step("HIBERNATING")
