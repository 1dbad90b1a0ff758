"""The launcher contract, end to end, for every launcher: local Spark, a Spark cluster and EMR Serverless.

The EMR launcher talks to `tests.fixtures.local_emr`, a local EMR Serverless endpoint that really runs
each job run under spark-submit (S3 is the moto server), so success, failure, cancel and re-attach are
checked on a running job, not on moto's instant SUCCESS. Each contract test costs one spark-submit
per launcher, the daemon end-to-end test one more (seven in all), so they are kept to the few that
matter; the endpoint's own behaviour (client tokens, S3 forwarding) is checked without Spark. The
Spark-cluster launcher submits to the session's loopback standalone cluster (`spark_cluster`), whose
executors are JVMs of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from daemon.adapters.cluster_launcher import ClusterSparkLauncher
from daemon.adapters.emr_launcher import EmrServerlessLauncher
from daemon.adapters.local_launcher import LocalSparkLauncher
from daemon.adapters.local_standby import SCRATCH
from daemon.adapters.packaging import package_and_upload
from daemon.config.emr_settings import EmrSettings
from daemon.contract.models import ReplayBody
from daemon.usecases.ports import Handle, JobOutcome, JobState, Launcher
from scripts.local_spark_cluster import Cluster
from tests.fixtures.aws import EXECUTION_ROLE_ARN, AwsClients, aws_client
from tests.fixtures.daemon import OWNER, running_daemon
from tests.fixtures.kafka import create_topic, topic_record_count, unique_topic
from tests.fixtures.local_emr import LocalEmrEndpoint, local_emr  # noqa: F401 (a fixture)
from tests.fixtures.runs import TERMINAL, wait_for
from tests.fixtures.spark import MAIN, job_spec

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

BUCKET = "replay-emr-local"
ONE_DAY = {"column": "dt", "start_day": "2024-01-02", "end_day": "2024-01-02"}  # 300 rows
JOB_TIMEOUT_S = 240.0


@dataclass
class Rig:
    """One launcher kind: a factory for fresh launcher instances and a look at the job's process."""

    kind: str
    make: Callable[[], Launcher]
    process_gone: Callable[[Handle], bool]
    job_runs: Callable[[], int]


def _group_gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _local_rig(tmp_path: Path) -> Rig:
    runs = tmp_path / "runs"

    def gone(handle: Handle) -> bool:
        LocalSparkLauncher(runs_dir=runs).state(handle)  # reaps our exited child
        return _group_gone(int(handle["pid"]))

    return Rig("local", lambda: LocalSparkLauncher(runs_dir=runs), gone, lambda: len(list(runs.iterdir())))


def _cluster_rig(tmp_path: Path, cluster: Cluster) -> Rig:
    """The driver runs here, as a local job's does; its executors are the cluster's."""
    runs = tmp_path / "runs"

    def make() -> Launcher:
        return ClusterSparkLauncher(
            master=cluster.master, executor_memory="512m", executor_wait_s=120.0, runs_dir=runs
        )

    def gone(handle: Handle) -> bool:
        make().state(handle)  # reaps our exited child
        return _group_gone(int(handle["pid"]))

    return Rig("spark", make, gone, lambda: len(list(runs.iterdir())))


def _emr_rig(aws: AwsClients, endpoint: LocalEmrEndpoint) -> Rig:
    aws.s3.create_bucket(Bucket=BUCKET)
    settings = EmrSettings(
        region=aws.region,
        endpoint_url=endpoint.endpoint_url,
        execution_role_arn=EXECUTION_ROLE_ARN,
        bucket=BUCKET,
        venv_uri=f"s3://{BUCKET}/fake/venv.tar.gz",  # the endpoint runs this interpreter's environment
        driver_cores=1,
        driver_memory_gb=2,
        executor_cores=1,
        executor_memory_gb=2,
    )
    artifacts = package_and_upload(settings, aws.s3, with_venv=False)

    def make() -> Launcher:
        return EmrServerlessLauncher(
            emr_client=aws_client("emr-serverless", endpoint.endpoint_url),
            s3_client=aws_client("s3", aws.endpoint_url),
            settings=settings,
            artifacts=artifacts,
            poll_interval_s=0.5,
        )

    def gone(handle: Handle) -> bool:
        process = endpoint.emr.job_runs[handle["job_run_id"]].process
        return process is not None and process.poll() is not None and _group_gone(process.pid)

    return Rig("emr", make, gone, lambda: len(endpoint.emr.job_runs))


# spark_job/main.py `_ship_package` tests the directory of main.py, not of the imported `spark_job`
# package: as an EMR entry point beside `--py-files spark_job.zip` it ships a second, different
# spark_job.zip and Spark refuses it ("... exists and does not match contents of ..."). Remove this
# mark once that is fixed (strict: the fixed job makes these tests pass, and then this mark fails).
@pytest.fixture(params=["local", "spark", "emr"])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    if request.param == "local":
        yield _local_rig(tmp_path)
        return
    if request.param == "spark":
        yield _cluster_rig(tmp_path, request.getfixturevalue("spark_cluster"))
        return
    yield _emr_rig(request.getfixturevalue("aws"), request.getfixturevalue("local_emr"))


def _spec(sample_table: Path, bootstrap: str, **overrides: Any) -> tuple[str, str]:
    topic = unique_topic("emr-local")
    create_topic(bootstrap, topic)
    document = job_spec(sample_table, bootstrap, topic, window=ONE_DAY, **overrides)
    return topic, json.dumps(document)


def _wait_for(launcher: Launcher, handle: Handle, wanted: JobState, timeout_s: float = JOB_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while (state := launcher.state(handle)) is not wanted:
        assert state is not JobState.LOST, f"job lost: {launcher.log_tail(handle)}"
        assert time.monotonic() < deadline, f"still {state} after {timeout_s}s: {launcher.log_tail(handle)}"
        time.sleep(0.5)


def _outcome(launcher: Launcher, handle: Handle) -> JobOutcome:
    outcome = launcher.outcome(handle)
    assert outcome is not None, f"no outcome; log tail: {launcher.log_tail(handle)}"
    return outcome


def test_a_run_succeeds_with_its_count_and_a_new_launcher_re_attaches_to_it(
    rig: Rig, sample_table: Path, kafka_bootstrap: str
) -> None:
    topic, spec = _spec(sample_table, kafka_bootstrap)
    launcher = rig.make()
    handle = launcher.submit("run-ok", spec, workers=2)
    assert launcher.submit("run-ok", spec, workers=2) == handle  # a retried submit re-attaches
    _wait_for(launcher, handle, JobState.EXITED)

    outcome = _outcome(launcher, handle)
    assert outcome.succeeded, outcome.payload
    assert outcome.payload["confirmed"] == topic_record_count(kafka_bootstrap, topic) == 300
    assert rig.job_runs() == 1
    if isinstance(launcher, LocalSparkLauncher):  # its driver zipped the package where the launcher said
        assert [path.suffix for path in launcher.package_dir.iterdir()] == [".zip"]

    stranger = rig.make()  # as after a daemon restart: nothing but the stored handle
    assert stranger.state(handle) is JobState.EXITED
    assert stranger.outcome(handle) == outcome
    assert stranger.submit("run-ok", spec, workers=2) == handle
    assert rig.job_runs() == 1


def test_a_failing_run_says_why(rig: Rig, sample_table: Path, kafka_bootstrap: str) -> None:
    _, spec = _spec(sample_table, kafka_bootstrap, key_column="customer")
    launcher = rig.make()
    handle = launcher.submit("run-bad", spec, workers=1)
    _wait_for(launcher, handle, JobState.EXITED)

    outcome = _outcome(launcher, handle)
    assert not outcome.succeeded
    assert outcome.reason == "unknown column 'customer' in source orders"
    assert launcher.log_tail(handle)


def test_a_cancelled_run_exits_and_its_process_is_gone(
    rig: Rig, sample_table: Path, kafka_bootstrap: str
) -> None:
    topic, spec = _spec(sample_table, kafka_bootstrap, tps=10)  # 300 rows: 30 s unless cancelled
    launcher = rig.make()
    handle = launcher.submit("run-cancel", spec, workers=1)
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while topic_record_count(kafka_bootstrap, topic) == 0:  # cancel once it really publishes
        assert launcher.state(handle) is not JobState.EXITED, launcher.log_tail(handle)
        assert time.monotonic() < deadline, "the job never published"
        time.sleep(0.5)

    if isinstance(launcher, LocalSparkLauncher):  # its driver's Spark scratch is in the run's folder
        assert list((launcher.run_dir("run-cancel") / SCRATCH).glob("blockmgr-*"))
    launcher.cancel(handle)
    _wait_for(launcher, handle, JobState.EXITED, timeout_s=60)
    outcome = launcher.outcome(handle)
    assert outcome is None or not outcome.succeeded
    assert topic_record_count(kafka_bootstrap, topic) < 300
    deadline = time.monotonic() + 30
    while not rig.process_gone(handle):
        assert time.monotonic() < deadline, "the job's process outlived its cancel"
        time.sleep(0.5)
    launcher.cancel(handle)  # cancelling a finished run is not an error


def test_the_endpoint_honours_client_tokens_and_fails_a_run_it_cannot_start(
    aws: AwsClients,
    local_emr: LocalEmrEndpoint,  # noqa: F811 (the fixture imported above)
) -> None:
    """No spark-submit here: the entry point is missing, so the run fails before starting Spark."""
    emr = aws_client("emr-serverless", local_emr.endpoint_url)
    app_id = emr.create_application(name="tokens", releaseLabel="emr-7.5.0", type="SPARK")["applicationId"]
    request = {
        "applicationId": app_id,
        "clientToken": "same-token",
        "name": "replay-r",
        "executionRoleArn": EXECUTION_ROLE_ARN,
        "jobDriver": {"sparkSubmit": {"entryPoint": f"s3://{BUCKET}/absent/main.py"}},
    }
    first = emr.start_job_run(**request)["jobRunId"]
    assert emr.start_job_run(**request)["jobRunId"] == first
    assert [run["id"] for run in emr.list_job_runs(applicationId=app_id)["jobRuns"]] == [first]

    deadline = time.monotonic() + 30
    seen = []
    while (run := emr.get_job_run(applicationId=app_id, jobRunId=first)["jobRun"])["state"] != "FAILED":
        seen.append(run["state"])
        assert time.monotonic() < deadline, seen
        time.sleep(0.1)
    assert "SUBMITTED" in seen and "Job failed to start" in run["stateDetails"]
    with contextlib.suppress(Exception):
        emr.stop_application(applicationId=app_id)
    emr.delete_application(applicationId=app_id)
    assert emr.get_application(applicationId=app_id)["application"]["state"] == "TERMINATED"


def test_one_endpoint_serves_s3_too_as_a_daemon_configures_its_clients(
    aws: AwsClients,
    local_emr: LocalEmrEndpoint,  # noqa: F811 (the fixture imported above)
) -> None:
    """The daemon gives its s3 and emr-serverless clients one `emr.endpoint_url`: S3 is forwarded to moto."""
    s3 = aws_client("s3", local_emr.endpoint_url)
    s3.create_bucket(Bucket=BUCKET)
    settings = EmrSettings(
        endpoint_url=local_emr.endpoint_url,
        execution_role_arn=EXECUTION_ROLE_ARN,
        bucket=BUCKET,
        venv_uri=f"s3://{BUCKET}/fake/venv.tar.gz",
    )
    artifacts = package_and_upload(settings, s3, with_venv=False)
    key = artifacts["entry_point"].removeprefix(f"s3://{BUCKET}/")
    direct = aws.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == direct == MAIN.read_bytes()
    assert package_and_upload(settings, s3, with_venv=False) == artifacts  # HEAD finds them: no upload

    launcher = EmrServerlessLauncher(
        emr_client=aws_client("emr-serverless", local_emr.endpoint_url),
        s3_client=s3,
        settings=settings,
        artifacts=artifacts,
        poll_interval_s=0.1,
    )
    app_id = launcher.ensure_application("replay-pipeline-p", 2)
    assert launcher.ensure_application("replay-pipeline-p", 2) == app_id
    assert launcher.delete_application(app_id, timeout_s=5)
    assert launcher.outcome({"result_uri": f"s3://{BUCKET}/absent.json"}) is None  # a 404 through the proxy


def test_a_daemon_with_launcher_emr_replays_a_window_end_to_end(
    aws: AwsClients,
    local_emr: LocalEmrEndpoint,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
    sample_table: Path,
    kafka_bootstrap: str,
) -> None:
    """`replayd` as deployed with `REPLAY_LAUNCHER=emr`, every AWS client on the local endpoint."""
    aws.s3.create_bucket(Bucket=BUCKET)
    emr = {
        "ENDPOINT_URL": local_emr.endpoint_url,
        "REGION": aws.region,
        "BUCKET": BUCKET,
        "EXECUTION_ROLE_ARN": EXECUTION_ROLE_ARN,
        "VENV_URI": f"s3://{BUCKET}/fake/venv.tar.gz",
        "DRIVER_CORES": "1",
        "DRIVER_MEMORY_GB": "2",
        "EXECUTOR_CORES": "1",
        "EXECUTOR_MEMORY_GB": "2",
    }
    credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    extra = {"REPLAY_LAUNCHER": "emr", **{f"REPLAY_EMR__{key}": value for key, value in emr.items()}}
    daemon = running_daemon(
        tmp_path, sample_table=sample_table, bootstrap=kafka_bootstrap, extra={**extra, **credentials}
    )
    try:
        client = daemon.client()
        run_id = client.create_replay(OWNER, ReplayBody(source="orders", window="2024-01-02..2024-01-02")).id
        run = wait_for(client, run_id, TERMINAL)
        left = _run_keys(aws, run_id)
        deadline = time.monotonic() + 15  # the watcher releases the run just after concluding it
        while f"replay/runs/{run_id}/spec.json" in left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = _run_keys(aws, run_id)
    finally:
        daemon.stop()

    assert run.state == "succeeded", (run, daemon.log_text()[-3000:])
    assert run.confirmed == topic_record_count(kafka_bootstrap, run.topic) == 300
    assert len(local_emr.emr.job_runs) == 1
    assert f"replay/runs/{run_id}/result.json" in left
    assert f"replay/runs/{run_id}/spec.json" not in left  # the Kafka password does not stay in S3


def _run_keys(aws: AwsClients, run_id: str) -> set[str]:
    listed = aws.s3.list_objects_v2(Bucket=BUCKET, Prefix=f"replay/runs/{run_id}/").get("Contents", [])
    return {item["Key"] for item in listed}
