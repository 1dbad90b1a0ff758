"""`EmrServerlessLauncher` against a moto server over real HTTP.

moto's EMR Serverless keeps the requests it was given (so application size and job run parameters
are checked as AWS received them) but runs nothing: a job run is SUCCESS at once, cancelling makes
it CANCELLED, client tokens are not honoured and applications start out STARTED. Tests that need
another job run state set it server-side with ``set_job_run_state`` and say so.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from daemon.adapters.aws_errors import aws_errors
from daemon.adapters.emr_launcher import EmrServerlessLauncher
from daemon.adapters.emr_states import UnknownEmrState
from daemon.config.emr_settings import EmrSettings, spark_heap
from daemon.core.errors import BadRequest, ConfigError, Conflict, NotFound, ReplayError, Unavailable
from daemon.usecases.ports import Handle, JobOutcome, JobState
from tests.fixtures.aws import EXECUTION_ROLE_ARN, AwsClients, aws_client, set_job_run_state

BUCKET = "replay-test"
ARTIFACTS = {
    "entry_point": f"s3://{BUCKET}/replay/artifacts/0123456789abcdef/main.py",
    "py_files": f"s3://{BUCKET}/replay/artifacts/0123456789abcdef/spark_job.zip",
    "venv": f"s3://{BUCKET}/replay/artifacts/fedcba9876543210/venv.tar.gz",
}
SPEC = {"run_id": "r-1", "topic": "replay.orders.r-1", "result_uri": "/var/lib/replay/runs/r-1/result.json"}


class FakeClock:
    """Time that passes only when the launcher sleeps, so polling is checked without waiting."""

    def __init__(self) -> None:
        self.now = 0.0
        self.calls: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.calls.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


# moto only accepts `emr-X.Y.0` labels; production defaults to emr-spark-8.0.0 (Spark 4.0, Python 3.11).
MOTO_RELEASE_LABEL = "emr-7.5.0"


def _settings(aws: AwsClients, **overrides: Any) -> EmrSettings:
    values = {
        "region": aws.region,
        "endpoint_url": aws.endpoint_url,
        "execution_role_arn": EXECUTION_ROLE_ARN,
        "bucket": BUCKET,
        "idle_stop_minutes": 5,
        "release_label": MOTO_RELEASE_LABEL,
    }
    return EmrSettings.model_validate({**values, **overrides})


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def launcher(aws: AwsClients, clock: FakeClock) -> EmrServerlessLauncher:
    aws.s3.create_bucket(Bucket=BUCKET)
    return EmrServerlessLauncher(
        emr_client=aws.emr_serverless,
        s3_client=aws.s3,
        settings=_settings(aws),
        artifacts=ARTIFACTS,
        poll_interval_s=7.0,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )


def _submit(launcher: EmrServerlessLauncher, run_id: str = "r-1", workers: int = 3, **kwargs: Any) -> Handle:
    return launcher.submit(run_id, json.dumps({**SPEC, "run_id": run_id}), workers=workers, **kwargs)


def _put_driver_log(aws: AwsClients, handle: Handle, stream: str, text: str) -> None:
    """Write a driver log where EMR Serverless publishes it: <logUri>/applications/…/SPARK_DRIVER/."""
    key = (
        f"replay/runs/{handle['run_id']}/logs/applications/{handle['application_id']}"
        f"/jobs/{handle['job_run_id']}/SPARK_DRIVER/{stream}.gz"
    )
    assert handle["log_uri"] == f"s3://{BUCKET}/replay/runs/{handle['run_id']}/logs/"
    aws.s3.put_object(Bucket=BUCKET, Key=key, Body=gzip.compress(text.encode()))


def _job_run(aws: AwsClients, handle: Handle) -> dict[str, Any]:
    response = aws.emr_serverless.get_job_run(
        applicationId=handle["application_id"], jobRunId=handle["job_run_id"]
    )
    return dict(response["jobRun"])


# -- application size ------------------------------------------------------------------------


def test_submit_creates_a_statically_sized_application(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    handle = _submit(launcher, workers=3)

    app = aws.emr_serverless.get_application(applicationId=handle["application_id"])["application"]
    worker = {"cpu": "4 vCPU", "memory": "16 GB"}
    assert {
        "DRIVER": {"workerCount": 1, "workerConfiguration": worker},
        "EXECUTOR": {"workerCount": 3, "workerConfiguration": worker},
    } == app["initialCapacity"]
    assert app["maximumCapacity"] == {"cpu": "16 vCPU", "memory": "64 GB"}
    assert (app["releaseLabel"], app["type"], app["name"]) == (MOTO_RELEASE_LABEL, "Spark", "replay-r-1")
    assert app["autoStopConfiguration"] == {"enabled": True, "idleTimeoutMinutes": 5}


def test_ensure_application_reuses_the_live_application_of_that_name(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    first = launcher.ensure_application("replay-pipeline-p-1", 2)

    assert first == launcher.ensure_application("replay-pipeline-p-1", 2)
    assert len(aws.emr_serverless.list_applications()["applications"]) == 1


def test_ensure_application_reads_capacity_however_aws_spells_it(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    """Created directly with other spellings and a disk; moto keeps it STARTED, so a resize would fail."""
    worker = {"cpu": "4vCPU", "memory": "16384 MB", "disk": "20 GB"}
    app_id = aws.emr_serverless.create_application(
        name="replay-pipeline-p-9",
        releaseLabel="emr-7.5.0",
        type="SPARK",
        initialCapacity={
            "DRIVER": {"workerCount": 1, "workerConfiguration": worker},
            "EXECUTOR": {"workerCount": 2, "workerConfiguration": worker},
        },
        maximumCapacity={"cpu": "12vCPU", "memory": "48GB"},
    )["applicationId"]

    assert launcher.ensure_application("replay-pipeline-p-9", 2) == app_id


def test_a_started_application_of_another_size_is_not_resized(launcher: EmrServerlessLauncher) -> None:
    launcher.ensure_application("replay-pipeline-p-1", 2)

    with pytest.raises(Unavailable, match="with another size"):
        launcher.ensure_application("replay-pipeline-p-1", 3)


def test_ensure_application_resizes_a_stopped_application(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    app_id = launcher.ensure_application("replay-pipeline-p-1", 2)
    aws.emr_serverless.stop_application(applicationId=app_id)

    assert app_id == launcher.ensure_application("replay-pipeline-p-1", 5)

    app = aws.emr_serverless.get_application(applicationId=app_id)["application"]
    assert app["initialCapacity"]["EXECUTOR"]["workerCount"] == 5
    assert app["maximumCapacity"] == {"cpu": "24 vCPU", "memory": "96 GB"}


def test_submit_on_a_pipeline_application_keeps_it_on_release(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    app_id = launcher.ensure_application("replay-pipeline-p-1", 3)

    handle = _submit(launcher, workers=3, application_id=app_id)

    assert (app_id, False) == (handle["application_id"], handle["owns_application"])
    assert launcher.release(handle) is True
    assert aws.emr_serverless.get_application(applicationId=app_id)["application"]["state"] == "STARTED"


def test_submit_refuses_more_executors_than_the_pipeline_application_has(
    launcher: EmrServerlessLauncher,
) -> None:
    app_id = launcher.ensure_application("replay-pipeline-p-1", 2)

    with pytest.raises(ConfigError, match="has 2 executors; the run asks for 4"):
        _submit(launcher, workers=4, application_id=app_id)


def test_spark_heap_leaves_room_for_the_overhead() -> None:
    assert (spark_heap(16), spark_heap(8), spark_heap(2)) == ("14848m", "7424m", "1536m")


def test_a_worker_size_emr_serverless_does_not_offer_is_refused() -> None:
    with pytest.raises(ValueError, match="executor_memory_gb=40 does not fit a 4-vCPU worker"):
        EmrSettings(executor_cores=4, executor_memory_gb=40)


# -- job run ---------------------------------------------------------------------------------


def test_job_run_is_submitted_with_static_spark_settings(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    handle = _submit(launcher, workers=3)

    run = _job_run(aws, handle)
    submit = run["jobDriver"]["sparkSubmit"]
    parameters = submit["sparkSubmitParameters"].split(" ")
    assert run["executionRole"] == EXECUTION_ROLE_ARN
    assert ARTIFACTS["entry_point"] == submit["entryPoint"]
    assert [handle["spec_uri"]] == submit["entryPointArguments"]
    for conf in (
        "spark.dynamicAllocation.enabled=false",
        "spark.executor.instances=3",
        "spark.executor.cores=4",
        "spark.executor.memory=14848m",
        "spark.driver.cores=4",
        "spark.speculation=false",
        "spark.task.maxFailures=3",
        f"spark.archives={ARTIFACTS['venv']}#environment",
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON=./environment/bin/python",
        "spark.executorEnv.PYSPARK_PYTHON=./environment/bin/python",
    ):
        assert conf in parameters
    assert ARTIFACTS["py_files"] == parameters[parameters.index("--py-files") + 1]
    logs = run["configurationOverrides"]["monitoringConfiguration"]["s3MonitoringConfiguration"]
    assert {"logUri": f"s3://{BUCKET}/replay/runs/r-1/logs/"} == logs


def test_extra_spark_conf_is_passed_but_cannot_undo_static_sizing(aws: AwsClients) -> None:
    aws.s3.create_bucket(Bucket=BUCKET)
    glue = "spark.hadoop.hive.metastore.client.factory.class"
    extra = {glue: "com.amazonaws.glue.catalog.metastore.AWSGlueDataCatalogHiveClientFactory"}
    extra["spark.dynamicAllocation.enabled"] = "true"
    settings = _settings(aws, spark_conf=extra)
    launcher = EmrServerlessLauncher(
        emr_client=aws.emr_serverless, s3_client=aws.s3, settings=settings, artifacts=ARTIFACTS
    )

    parameters = _job_run(aws, _submit(launcher))["jobDriver"]["sparkSubmit"]["sparkSubmitParameters"]

    assert f"{glue}={extra[glue]}" in parameters.split(" ")
    assert "spark.dynamicAllocation.enabled=true" not in parameters
    assert parameters.split(" ").count("spark.dynamicAllocation.enabled=false") == 1


def test_submit_uploads_the_spec_with_an_s3_result_uri(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    handle = _submit(launcher)

    stored = aws.s3.get_object(Bucket=BUCKET, Key="replay/runs/r-1/spec.json")
    spec = json.loads(stored["Body"].read())
    assert f"s3://{BUCKET}/replay/runs/r-1/spec.json" == handle["spec_uri"]
    assert {**SPEC, "result_uri": f"s3://{BUCKET}/replay/runs/r-1/result.json"} == spec
    assert handle["result_uri"] == spec["result_uri"]
    assert stored["ServerSideEncryption"] == "AES256"


def test_with_a_kms_key_the_spec_and_the_logs_are_encrypted_with_it(aws: AwsClients) -> None:
    aws.s3.create_bucket(Bucket=BUCKET)
    key_arn = aws.kms.create_key(Description="replay specs")["KeyMetadata"]["Arn"]
    launcher = EmrServerlessLauncher(
        emr_client=aws.emr_serverless,
        s3_client=aws.s3,
        settings=_settings(aws, kms_key_arn=key_arn),
        artifacts=ARTIFACTS,
    )

    handle = _submit(launcher)

    stored = aws.s3.head_object(Bucket=BUCKET, Key="replay/runs/r-1/spec.json")
    assert ("aws:kms", key_arn) == (stored["ServerSideEncryption"], stored["SSEKMSKeyId"])
    logs = _job_run(aws, handle)["configurationOverrides"]["monitoringConfiguration"][
        "s3MonitoringConfiguration"
    ]
    assert key_arn == logs["encryptionKeyArn"]


def test_a_retried_submit_reattaches_to_the_same_job_run(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    """moto ignores client tokens, so this checks the look-up by name that backs them up."""
    first = _submit(launcher)

    again = _submit(launcher)

    assert first == again
    assert len(aws.emr_serverless.list_job_runs(applicationId=first["application_id"])["jobRuns"]) == 1
    assert len(aws.emr_serverless.list_applications()["applications"]) == 1


def test_each_run_gets_its_own_application(aws: AwsClients, launcher: EmrServerlessLauncher) -> None:
    first, second = _submit(launcher, "r-1"), _submit(launcher, "r-2")

    assert first["application_id"] != second["application_id"]


def test_submit_with_a_missing_bucket_is_a_config_error(aws: AwsClients) -> None:
    launcher = EmrServerlessLauncher(
        emr_client=aws.emr_serverless, s3_client=aws.s3, settings=_settings(aws), artifacts=ARTIFACTS
    )

    with pytest.raises(ConfigError, match="NoSuchBucket") as caught:
        _submit(launcher)
    assert caught.value.__cause__ is not None


def test_a_spec_that_is_not_json_is_refused(launcher: EmrServerlessLauncher) -> None:
    with pytest.raises(BadRequest, match="not JSON"):
        launcher.submit("r-1", "{not json", workers=1)


def test_the_launcher_needs_a_job_environment(aws: AwsClients) -> None:
    without_venv = {key: value for key, value in ARTIFACTS.items() if key != "venv"}

    with pytest.raises(ConfigError, match="replayd package --with-venv"):
        EmrServerlessLauncher(
            emr_client=aws.emr_serverless, s3_client=aws.s3, settings=_settings(aws), artifacts=without_venv
        )


# -- watching --------------------------------------------------------------------------------


def test_a_finished_job_run_has_exited(launcher: EmrServerlessLauncher) -> None:
    """moto reports SUCCESS as soon as the run is started."""
    handle = _submit(launcher)

    assert launcher.state(handle) == JobState.EXITED


@pytest.mark.parametrize(
    ("emr_state", "expected"),
    [("SUBMITTED", JobState.PENDING), ("QUEUED", JobState.PENDING), ("RUNNING", JobState.RUNNING)],
)
def test_state_is_read_over_http(launcher: EmrServerlessLauncher, emr_state: str, expected: JobState) -> None:
    """The state is set server-side (moto never moves a run through these states by itself)."""
    handle = _submit(launcher)
    set_job_run_state(handle["application_id"], handle["job_run_id"], emr_state)

    assert expected == launcher.state(handle)


def test_an_unknown_state_from_aws_is_an_error(launcher: EmrServerlessLauncher) -> None:
    handle = _submit(launcher)
    set_job_run_state(handle["application_id"], handle["job_run_id"], "HIBERNATING")

    with pytest.raises(UnknownEmrState, match="'HIBERNATING'"):
        launcher.state(handle)


def test_a_job_run_that_no_longer_exists_is_lost(launcher: EmrServerlessLauncher) -> None:
    handle = _submit(launcher)

    assert launcher.state({**handle, "job_run_id": "0000000000000000"}) == JobState.LOST


def test_wait_for_exit_returns_at_once_when_the_run_is_over(
    launcher: EmrServerlessLauncher, clock: FakeClock
) -> None:
    handle = _submit(launcher)

    assert launcher.wait_for_exit(handle, timeout_s=60) == JobState.EXITED
    assert clock.calls == []


def test_wait_for_exit_polls_at_the_interval_until_the_timeout(
    launcher: EmrServerlessLauncher, clock: FakeClock
) -> None:
    handle = _submit(launcher)
    set_job_run_state(handle["application_id"], handle["job_run_id"], "RUNNING")

    assert launcher.wait_for_exit(handle, timeout_s=20) == JobState.RUNNING
    assert clock.calls == [7.0, 7.0]  # a third interval would overrun the timeout


# -- outcome ---------------------------------------------------------------------------------


def test_outcome_is_the_result_line_of_the_driver_stdout(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    handle = _submit(launcher)
    _put_driver_log(
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
    handle = _submit(launcher)
    _put_driver_log(
        aws, handle, "stdout", 'REPLAY_FAILED {"status": "failed", "reason": "broker down", "confirmed": 0}\n'
    )

    outcome = launcher.outcome(handle)

    assert outcome is not None
    assert (outcome.succeeded, outcome.reason) == (False, "broker down")


def test_outcome_prefers_the_result_document(aws: AwsClients, launcher: EmrServerlessLauncher) -> None:
    handle = _submit(launcher)
    document = {"status": "succeeded", "run_id": "r-1", "confirmed": 42}
    aws.s3.put_object(Bucket=BUCKET, Key="replay/runs/r-1/result.json", Body=json.dumps(document).encode())

    assert JobOutcome(succeeded=True, payload=document) == launcher.outcome(handle)


def test_no_outcome_while_the_run_is_running_without_a_result_document(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    """RUNNING is set server-side; the log line alone is not read until the run is over."""
    handle = _submit(launcher)
    set_job_run_state(handle["application_id"], handle["job_run_id"], "RUNNING")
    _put_driver_log(aws, handle, "stdout", 'REPLAY_RESULT {"status": "succeeded"}\n')

    assert launcher.outcome(handle) is None


def test_no_outcome_after_success_without_any_output(launcher: EmrServerlessLauncher) -> None:
    handle = _submit(launcher)

    assert launcher.outcome(handle) is None


def test_a_run_that_failed_without_a_line_fails_with_its_state_details(
    launcher: EmrServerlessLauncher,
) -> None:
    """FAILED is set server-side: moto never fails a run by itself."""
    handle = _submit(launcher)
    details = "Job failed, please check complete logs in configured logging destination. ExitCode: 137."
    set_job_run_state(handle["application_id"], handle["job_run_id"], "FAILED", details)

    assert JobOutcome(succeeded=False, payload={"reason": details}) == launcher.outcome(handle)


def test_log_tail_is_the_end_of_the_driver_stderr(aws: AwsClients, launcher: EmrServerlessLauncher) -> None:
    handle = _submit(launcher)
    _put_driver_log(aws, handle, "stderr", "\n".join(f"line {i}" for i in range(50)) + "\n")

    assert launcher.log_tail(handle, 3) == ["line 47", "line 48", "line 49"]


def test_log_tail_is_empty_before_any_log_was_published(launcher: EmrServerlessLauncher) -> None:
    handle = _submit(launcher)

    assert launcher.log_tail(handle) == []


# -- cancel and release ----------------------------------------------------------------------


def test_cancel_cancels_a_running_job_run(aws: AwsClients, launcher: EmrServerlessLauncher) -> None:
    """RUNNING is set server-side; moto's cancel_job_run then reports CANCELLED."""
    handle = _submit(launcher)
    set_job_run_state(handle["application_id"], handle["job_run_id"], "RUNNING")

    launcher.cancel(handle)

    assert _job_run(aws, handle)["state"] == "CANCELLED"
    assert JobOutcome(succeeded=False, payload={"reason": "EMR Serverless job run cancelled"}) == (
        launcher.outcome(handle)
    )


def test_cancel_leaves_a_finished_job_run_alone(aws: AwsClients, launcher: EmrServerlessLauncher) -> None:
    handle = _submit(launcher)

    launcher.cancel(handle)

    assert _job_run(aws, handle)["state"] == "SUCCESS"


def test_cancel_of_a_job_run_that_is_gone_is_not_an_error(launcher: EmrServerlessLauncher) -> None:
    handle = _submit(launcher)

    launcher.cancel({**handle, "application_id": "0000000000000000"})


def test_release_stops_then_deletes_the_runs_application(
    aws: AwsClients, launcher: EmrServerlessLauncher, clock: FakeClock
) -> None:
    """moto applications are STARTED from creation and stop at once; AWS takes a while."""
    handle = _submit(launcher)

    assert launcher.release(handle, timeout_s=60) is True

    assert clock.calls == [7.0]
    app = aws.emr_serverless.get_application(applicationId=handle["application_id"])["application"]
    assert app["state"] == "TERMINATED"


def test_release_without_a_timeout_takes_one_step_at_a_time(launcher: EmrServerlessLauncher) -> None:
    handle = _submit(launcher)

    assert [launcher.release(handle), launcher.release(handle)] == [False, True]


def test_release_is_idempotent(launcher: EmrServerlessLauncher) -> None:
    handle = _submit(launcher)
    launcher.release(handle, timeout_s=60)

    assert launcher.release(handle) is True


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
        {"Error": {"Code": code, "Message": "details"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op"
    )

    with pytest.raises(ReplayError) as caught, aws_errors("do the thing"):
        raise error

    assert type(caught.value) is expected
    assert str(caught.value) == f"do the thing failed: {code}: details"
    assert caught.value.__cause__ is error


def test_an_unreachable_endpoint_is_unavailable(aws: AwsClients) -> None:
    closed = "http://127.0.0.1:9"
    launcher = EmrServerlessLauncher(
        emr_client=aws_client("emr-serverless", closed),
        s3_client=aws_client("s3", closed),
        settings=_settings(aws),
        artifacts=ARTIFACTS,
    )

    with pytest.raises(Unavailable, match="get EMR Serverless job run"):
        launcher.state({"application_id": "a", "job_run_id": "j"})
