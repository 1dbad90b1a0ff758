"""`EmrServerlessLauncher` over real HTTP to moto: the application it sizes and the job run it submits.

How moto stands in for EMR Serverless is in `tests.fixtures.emr_launcher`; watching, outcomes,
cancelling, releasing and AWS errors are in `test_emr_launcher_runs.py`.
"""

from __future__ import annotations

import json

import pytest

from daemon.adapters.emr_launcher import EmrServerlessLauncher
from daemon.config.emr_settings import EmrSettings, spark_heap
from daemon.core.errors import BadRequest, ConfigError, Unavailable
from daemon.core.spark_releases import EMR_DELTA_JARS, EMR_ICEBERG_JAR
from tests.fixtures.aws import EXECUTION_ROLE_ARN, AwsClients
from tests.fixtures.emr_launcher import (
    ARTIFACTS,
    BUCKET,
    MOTO_RELEASE_LABEL,
    SPEC,
    emr_settings,
    job_run,
    submit_run,
)

# -- application size ------------------------------------------------------------------------


def test_submit_creates_a_statically_sized_application(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    handle = submit_run(launcher, workers=3)

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

    handle = submit_run(launcher, workers=3, application_id=app_id)

    assert (app_id, False) == (handle["application_id"], handle["owns_application"])
    assert launcher.release(handle) is True
    assert aws.emr_serverless.get_application(applicationId=app_id)["application"]["state"] == "STARTED"


def test_submit_refuses_more_executors_than_the_pipeline_application_has(
    launcher: EmrServerlessLauncher,
) -> None:
    app_id = launcher.ensure_application("replay-pipeline-p-1", 2)

    with pytest.raises(ConfigError, match="has 2 executors; the run asks for 4"):
        submit_run(launcher, workers=4, application_id=app_id)


def test_spark_heap_leaves_room_for_the_overhead() -> None:
    assert (spark_heap(16), spark_heap(8), spark_heap(2)) == ("14848m", "7424m", "1536m")


def test_a_worker_size_emr_serverless_does_not_offer_is_refused() -> None:
    with pytest.raises(ValueError, match="executor_memory_gb=40 does not fit a 4-vCPU worker"):
        EmrSettings(executor_cores=4, executor_memory_gb=40)


# -- job run ---------------------------------------------------------------------------------


def test_job_run_is_submitted_with_static_spark_settings(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    handle = submit_run(launcher, workers=3)

    run = job_run(aws, handle)
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
        f"spark.jars={EMR_ICEBERG_JAR},{','.join(EMR_DELTA_JARS)}",  # the release's own lake runtimes
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
    extra["spark.jars"] = "s3://bucket/udfs.jar"
    settings = emr_settings(aws, spark_conf=extra)
    launcher = EmrServerlessLauncher(
        emr_client=aws.emr_serverless, s3_client=aws.s3, settings=settings, artifacts=ARTIFACTS
    )

    parameters = job_run(aws, submit_run(launcher))["jobDriver"]["sparkSubmit"]["sparkSubmitParameters"]

    assert f"{glue}={extra[glue]}" in parameters.split(" ")
    assert "spark.dynamicAllocation.enabled=true" not in parameters
    assert parameters.split(" ").count("spark.dynamicAllocation.enabled=false") == 1
    [jars] = [word for word in parameters.split(" ") if word.startswith("spark.jars=")]
    assert jars.removeprefix("spark.jars=").split(",") == [
        "s3://bucket/udfs.jar",
        EMR_ICEBERG_JAR,
        *EMR_DELTA_JARS,
    ]


def test_submit_uploads_the_spec_with_an_s3_result_uri(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    handle = submit_run(launcher)

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
        settings=emr_settings(aws, kms_key_arn=key_arn),
        artifacts=ARTIFACTS,
    )

    handle = submit_run(launcher)

    stored = aws.s3.head_object(Bucket=BUCKET, Key="replay/runs/r-1/spec.json")
    assert ("aws:kms", key_arn) == (stored["ServerSideEncryption"], stored["SSEKMSKeyId"])
    logs = job_run(aws, handle)["configurationOverrides"]["monitoringConfiguration"][
        "s3MonitoringConfiguration"
    ]
    assert key_arn == logs["encryptionKeyArn"]


def test_a_retried_submit_reattaches_to_the_same_job_run(
    aws: AwsClients, launcher: EmrServerlessLauncher
) -> None:
    """moto ignores client tokens, so this checks the look-up by name that backs them up."""
    first = submit_run(launcher)

    again = submit_run(launcher)

    assert first == again
    assert len(aws.emr_serverless.list_job_runs(applicationId=first["application_id"])["jobRuns"]) == 1
    assert len(aws.emr_serverless.list_applications()["applications"]) == 1


def test_each_run_gets_its_own_application(aws: AwsClients, launcher: EmrServerlessLauncher) -> None:
    first, second = submit_run(launcher, "r-1"), submit_run(launcher, "r-2")

    assert first["application_id"] != second["application_id"]


def test_submit_with_a_missing_bucket_is_a_config_error(aws: AwsClients) -> None:
    launcher = EmrServerlessLauncher(
        emr_client=aws.emr_serverless, s3_client=aws.s3, settings=emr_settings(aws), artifacts=ARTIFACTS
    )

    with pytest.raises(ConfigError, match="NoSuchBucket") as caught:
        submit_run(launcher)
    assert caught.value.__cause__ is not None


def test_a_spec_that_is_not_json_is_refused(launcher: EmrServerlessLauncher) -> None:
    with pytest.raises(BadRequest, match="not JSON"):
        launcher.submit("r-1", "{not json", workers=1)


def test_the_launcher_needs_a_job_environment(aws: AwsClients) -> None:
    without_venv = {key: value for key, value in ARTIFACTS.items() if key != "venv"}

    with pytest.raises(ConfigError, match="replayd package --with-venv"):
        EmrServerlessLauncher(
            emr_client=aws.emr_serverless,
            s3_client=aws.s3,
            settings=emr_settings(aws),
            artifacts=without_venv,
        )
