"""`EmrServerlessLauncher` over real HTTP to moto, once a job run exists: its state, its outcome, its
logs, cancelling it and releasing its application and its spec; and AWS errors as domain errors.

How moto stands in for EMR Serverless is in `tests.fixtures.emr_launcher`; sizing and submitting are
in `test_emr_launcher.py`.
"""

from __future__ import annotations

import json

import pytest
from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import ClientError

from daemon.adapters.aws_errors import aws_errors
from daemon.adapters.emr_launcher import EmrServerlessLauncher
from daemon.adapters.emr_states import UnknownEmrState
from daemon.core.errors import ConfigError, Conflict, NotFound, ReplayError, Unavailable
from daemon.usecases.ports import JobOutcome, JobState
from tests.fixtures.aws import AwsClients, aws_client, set_job_run_state
from tests.fixtures.emr_launcher import (
    ARTIFACTS,
    BUCKET,
    FakeClock,
    emr_settings,
    job_run,
    put_driver_log,
    submit_run,
)

# -- watching --------------------------------------------------------------------------------


def test_a_finished_job_run_has_exited(launcher: EmrServerlessLauncher) -> None:
    """moto reports SUCCESS as soon as the run is started."""
    handle = submit_run(launcher)

    assert launcher.state(handle) == JobState.EXITED


@pytest.mark.parametrize(
    ("emr_state", "expected"),
    [("SUBMITTED", JobState.PENDING), ("QUEUED", JobState.PENDING), ("RUNNING", JobState.RUNNING)],
)
def test_state_is_read_over_http(launcher: EmrServerlessLauncher, emr_state: str, expected: JobState) -> None:
    """The state is set server-side (moto never moves a run through these states by itself)."""
    handle = submit_run(launcher)
    set_job_run_state(handle["application_id"], handle["job_run_id"], emr_state)

    assert expected == launcher.state(handle)


def test_an_unknown_state_from_aws_is_an_error(launcher: EmrServerlessLauncher) -> None:
    handle = submit_run(launcher)
    set_job_run_state(handle["application_id"], handle["job_run_id"], "HIBERNATING")

    with pytest.raises(UnknownEmrState, match="'HIBERNATING'"):
        launcher.state(handle)


def test_a_job_run_that_no_longer_exists_is_lost(launcher: EmrServerlessLauncher) -> None:
    handle = submit_run(launcher)

    assert launcher.state({**handle, "job_run_id": "0000000000000000"}) == JobState.LOST


def test_wait_for_exit_returns_at_once_when_the_run_is_over(
    launcher: EmrServerlessLauncher, clock: FakeClock
) -> None:
    handle = submit_run(launcher)

    assert launcher.wait_for_exit(handle, timeout_s=60) == JobState.EXITED
    assert clock.calls == []


def test_wait_for_exit_polls_at_the_interval_until_the_timeout(
    launcher: EmrServerlessLauncher, clock: FakeClock
) -> None:
    handle = submit_run(launcher)
    set_job_run_state(handle["application_id"], handle["job_run_id"], "RUNNING")

    assert launcher.wait_for_exit(handle, timeout_s=20) == JobState.RUNNING
    assert clock.calls == [7.0, 7.0, 6.0]  # the last look is at the deadline, never past it


# -- outcome ---------------------------------------------------------------------------------


def test_outcome_is_the_result_line_of_the_driver_stdout(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    handle = submit_run(launcher)
    put_driver_log(
        aws,
        handle,
        "stdout",
        'starting\nREPLAY_RESULT {"status": "succeeded", "confirmed": 900, "tps": 100}\n',
    )

    assert JobOutcome(succeeded=True, payload={"status": "succeeded", "confirmed": 900, "tps": 100}) == (
        launcher.outcome(handle)
    )


def test_outcome_is_the_failure_line_of_the_driver_stdout(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    handle = submit_run(launcher)
    put_driver_log(
        aws, handle, "stdout", 'REPLAY_FAILED {"status": "failed", "reason": "broker down", "confirmed": 0}\n'
    )

    outcome = launcher.outcome(handle)

    assert outcome is not None
    assert (outcome.succeeded, outcome.reason) == (False, "broker down")


def test_outcome_prefers_the_result_document(aws: AwsClients, launcher: EmrServerlessLauncher) -> None:
    handle = submit_run(launcher)
    document = {"status": "succeeded", "run_id": "r-1", "confirmed": 42}
    aws.s3.put_object(Bucket=BUCKET, Key="replay/runs/r-1/result.json", Body=json.dumps(document).encode())

    assert JobOutcome(succeeded=True, payload=document) == launcher.outcome(handle)


def test_no_outcome_while_the_run_is_running_without_a_result_document(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    """RUNNING is set server-side; the log line alone is not read until the run is over."""
    handle = submit_run(launcher)
    set_job_run_state(handle["application_id"], handle["job_run_id"], "RUNNING")
    put_driver_log(aws, handle, "stdout", 'REPLAY_RESULT {"status": "succeeded"}\n')

    assert launcher.outcome(handle) is None


def test_no_outcome_after_success_without_any_output(launcher: EmrServerlessLauncher) -> None:
    handle = submit_run(launcher)

    assert launcher.outcome(handle) is None


def test_a_run_that_failed_without_a_line_fails_with_its_state_details(
    launcher: EmrServerlessLauncher,
) -> None:
    """FAILED is set server-side: moto never fails a run by itself."""
    handle = submit_run(launcher)
    details = "Job failed, please check complete logs in configured logging destination. ExitCode: 137."
    set_job_run_state(handle["application_id"], handle["job_run_id"], "FAILED", details)

    assert JobOutcome(succeeded=False, payload={"reason": details}) == launcher.outcome(handle)


def test_log_tail_is_the_end_of_the_driver_stderr(aws: AwsClients, launcher: EmrServerlessLauncher) -> None:
    handle = submit_run(launcher)
    put_driver_log(aws, handle, "stderr", "\n".join(f"line {i}" for i in range(50)) + "\n")

    assert launcher.log_tail(handle, 3) == ["line 47", "line 48", "line 49"]


def test_log_tail_is_empty_before_any_log_was_published(launcher: EmrServerlessLauncher) -> None:
    handle = submit_run(launcher)

    assert launcher.log_tail(handle) == []


# -- cancel and release ----------------------------------------------------------------------


def test_cancel_cancels_a_running_job_run(aws: AwsClients, launcher: EmrServerlessLauncher) -> None:
    """RUNNING is set server-side; moto's cancel_job_run then reports CANCELLED."""
    handle = submit_run(launcher)
    set_job_run_state(handle["application_id"], handle["job_run_id"], "RUNNING")

    launcher.cancel(handle)

    assert job_run(aws, handle)["state"] == "CANCELLED"
    assert JobOutcome(succeeded=False, payload={"reason": "EMR Serverless job run cancelled"}) == (
        launcher.outcome(handle)
    )


def test_cancel_leaves_a_finished_job_run_alone(aws: AwsClients, launcher: EmrServerlessLauncher) -> None:
    handle = submit_run(launcher)

    launcher.cancel(handle)

    assert job_run(aws, handle)["state"] == "SUCCESS"


def test_cancel_of_a_job_run_that_is_gone_is_not_an_error(launcher: EmrServerlessLauncher) -> None:
    handle = submit_run(launcher)

    launcher.cancel({**handle, "application_id": "0000000000000000"})


def test_release_stops_then_deletes_the_runs_application(
    aws: AwsClients, launcher: EmrServerlessLauncher, clock: FakeClock
) -> None:
    """moto applications are STARTED from creation and stop at once; AWS takes a while."""
    handle = submit_run(launcher)

    assert launcher.release(handle, timeout_s=60) is True

    assert clock.calls == [7.0]
    app = aws.emr_serverless.get_application(applicationId=handle["application_id"])["application"]
    assert app["state"] == "TERMINATED"


def test_release_without_a_timeout_takes_one_step_at_a_time(launcher: EmrServerlessLauncher) -> None:
    handle = submit_run(launcher)

    assert [launcher.release(handle), launcher.release(handle)] == [False, True]


def test_release_is_idempotent(launcher: EmrServerlessLauncher) -> None:
    handle = submit_run(launcher)
    launcher.release(handle, timeout_s=60)

    assert launcher.release(handle) is True


def _spec_keys(aws: AwsClients) -> list[str]:
    listed = aws.s3.list_objects_v2(Bucket=BUCKET, Prefix="replay/runs/").get("Contents", [])
    return [item["Key"] for item in listed if item["Key"].endswith("/spec.json")]


def test_release_deletes_the_runs_spec_with_its_kafka_password_from_s3(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    handle = submit_run(launcher)
    assert _spec_keys(aws) == ["replay/runs/r-1/spec.json"]

    assert launcher.release(handle, timeout_s=60) is True

    assert _spec_keys(aws) == []
    assert launcher.release(handle) is True  # a spec already gone is not an error


def test_a_refused_spec_delete_is_raised_after_the_application_was_stopped_and_deleted(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    """Raised, not answered False: the watcher tries a failing release again after a pause, not
    at every tick (daemon.runtime.releases)."""
    handle = submit_run(launcher)
    refusing = {**handle, "spec_uri": "s3://no-such-bucket/replay/runs/r-1/spec.json"}

    with pytest.raises(ReplayError, match="no-such-bucket"):
        launcher.release(refusing, timeout_s=60)

    app = aws.emr_serverless.get_application(applicationId=handle["application_id"])["application"]
    assert app["state"] == "TERMINATED"  # the refusal held nothing else back
    assert launcher.release(handle) is True  # once it can delete the spec: done


def test_release_of_a_pipeline_run_deletes_its_spec_and_keeps_the_application(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    app_id = launcher.ensure_application("replay-pipeline-p-1", 3)
    handle = submit_run(launcher, workers=3, application_id=app_id)

    assert launcher.release(handle) is True

    assert _spec_keys(aws) == []
    assert aws.emr_serverless.get_application(applicationId=app_id)["application"]["state"] == "STARTED"


def test_a_run_that_cannot_start_leaves_no_spec_in_s3(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    """It is never released (it has no job run to follow), so its spec goes at once."""
    app_id = launcher.ensure_application("replay-pipeline-p-1", 2)

    with pytest.raises(ConfigError, match="has 2 executors"):
        submit_run(launcher, workers=4, application_id=app_id)

    assert _spec_keys(aws) == []


def test_deleting_an_application_that_does_not_exist_is_not_an_error(launcher: EmrServerlessLauncher) -> None:
    assert launcher.delete_application("0000000000000000") is True


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("ThrottlingException", 400, Unavailable),
        ("InternalServerException", 500, Unavailable),
        ("ServiceQuotaExceededException", 402, Unavailable),
        ("ResourceNotFoundException", 400, NotFound),
        ("NoSuchKey", 404, NotFound),
        ("NoSuchBucket", 404, ConfigError),
        ("AccessDeniedException", 403, ConfigError),
        ("ValidationException", 400, ConfigError),
        ("ConflictException", 409, Conflict),
    ],
)
def test_aws_error_codes_become_domain_errors(code: str, status: int, expected: type[ReplayError]) -> None:
    """A constructed botocore error: moto cannot be made to throttle or to fail internally."""
    error = ClientError(
        {
            "Error": {"Code": code, "Message": "details"},
            "ResponseMetadata": {
                "RequestId": "r",
                "HostId": "h",
                "HTTPStatusCode": status,
                "HTTPHeaders": {},
                "RetryAttempts": 0,
            },
        },
        "Op",
    )

    with pytest.raises(ReplayError) as caught, aws_errors("do the thing"):
        raise error

    assert type(caught.value) is expected
    assert str(caught.value) == f"do the thing failed: {code}: details"
    assert caught.value.__cause__ is error


def test_a_failed_s3_upload_is_unavailable_and_any_other_error_passes_through() -> None:
    """boto3's transfer failure is not a botocore error; `aws_errors` imports boto3 only to name it."""
    upload = S3UploadFailedError("Failed to upload job.zip to bucket/key: connection reset")
    with (
        pytest.raises(Unavailable, match="upload the job: Failed to upload") as caught,
        aws_errors("upload the job"),
    ):
        raise upload
    assert caught.value.__cause__ is upload
    other = KeyError("not an AWS error")
    with pytest.raises(KeyError) as passed, aws_errors("read a file"):
        raise other
    assert passed.value is other


def test_an_unreachable_endpoint_is_unavailable(aws: AwsClients) -> None:
    closed = "http://127.0.0.1:9"
    launcher = EmrServerlessLauncher(
        emr_client=aws_client("emr-serverless", closed),
        s3_client=aws_client("s3", closed),
        settings=emr_settings(aws),
        artifacts=ARTIFACTS,
    )

    with pytest.raises(Unavailable, match="get EMR Serverless job run"):
        launcher.state({"application_id": "a", "job_run_id": "j"})
