"""Warm EMR Serverless applications (`emr.warm_applications`) against the local endpoint.

The endpoint (`tests.fixtures.local_emr`) keeps application and job run states as EMR does and runs
each job run as a local spark-submit; here the entry point only sleeps, so a job run stays active
until the test cancels it. Starting an application takes a step (STARTING, then STARTED), or fails
as the test asks: its capacity does not come up (back to STOPPED with a reason), or the start is
refused over a quota.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import ValidationError
from structlog.testing import capture_logs

from daemon.adapters.emr_launcher import EmrServerlessLauncher
from daemon.adapters.emr_warm_pool import WARM_TAG, warm_name
from daemon.config.emr_settings import EmrSettings
from daemon.usecases.ports import Handle
from tests.fixtures.aws import EXECUTION_ROLE_ARN, AwsClients, aws_client
from tests.fixtures.emr_launcher import BUCKET, FakeClock
from tests.fixtures.local_emr import LocalEmrEndpoint, local_emr  # noqa: F401 (a fixture)

pytestmark = pytest.mark.spark  # job runs are local spark-submits (of a script that sleeps)

SLEEPER = f"s3://{BUCKET}/warm-test/main.py"
ARTIFACTS = {"entry_point": SLEEPER, "py_files": f"s3://{BUCKET}/warm-test/spark_job.zip"}
SPEC = json.dumps({"run_id": "r-warm"})


@pytest.fixture
def world(aws: AwsClients, local_emr: LocalEmrEndpoint) -> Iterator[World]:  # noqa: F811
    aws.s3.create_bucket(Bucket=BUCKET)
    aws.s3.put_object(Bucket=BUCKET, Key="warm-test/main.py", Body=b"import time\ntime.sleep(120)\n")
    aws.s3.put_object(Bucket=BUCKET, Key="warm-test/spark_job.zip", Body=b"")
    made = World(aws, local_emr)
    yield made
    made.close()


class World:
    """Launchers (daemons) sharing the endpoint, and what the test looks at."""

    def __init__(self, aws: AwsClients, endpoint: LocalEmrEndpoint) -> None:
        self.aws, self.endpoint, self.clock = aws, endpoint, FakeClock()
        self.launchers: list[EmrServerlessLauncher] = []

    def launcher(self, *, warm: int = 1, max_runs: int = 2, executors: int = 1) -> EmrServerlessLauncher:
        settings = EmrSettings(
            region=self.aws.region,
            endpoint_url=self.endpoint.endpoint_url,
            execution_role_arn=EXECUTION_ROLE_ARN,
            bucket=BUCKET,
            venv_uri=f"s3://{BUCKET}/fake/venv.tar.gz",
            driver_cores=1,
            driver_memory_gb=2,
            executor_cores=1,
            executor_memory_gb=2,
            executors_default=executors,
            warm_applications=warm,
            max_concurrent_runs=max_runs,
        )
        launcher = EmrServerlessLauncher(
            emr_client=aws_client("emr-serverless", self.endpoint.endpoint_url),
            s3_client=self.aws.s3,
            settings=settings,
            artifacts=ARTIFACTS,
            poll_interval_s=0.1,
            monotonic=self.clock.monotonic,  # the keeper's back-off waits for the test's clock
        )
        self.launchers.append(launcher)
        return launcher

    def app(self, name: str) -> dict[str, Any]:
        (app,) = [
            app
            for app in self.endpoint.emr.applications.values()
            if app["name"] == name and app["state"] != "TERMINATED"
        ]
        return app

    def states(self) -> dict[str, str]:
        """Each live application's state, by name."""
        apps = self.endpoint.emr.applications.values()
        return {app["name"]: app["state"] for app in apps if app["state"] != "TERMINATED"}

    def job_run(self, handle: Handle) -> Any:
        return self.endpoint.emr.job_runs[handle["job_run_id"]]

    def close(self) -> None:
        for launcher in self.launchers:
            launcher.close()
        for run in list(self.endpoint.emr.job_runs.values()):
            if run.state not in ("SUCCESS", "FAILED", "CANCELLED", "CANCELLING"):
                self.endpoint.emr.cancel_job_run(run)


def _until(check: Callable[[], Any], timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (answer := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return answer


def test_a_run_starts_on_a_started_warm_application_that_outlives_it(world: World) -> None:
    launcher = world.launcher(warm=1)
    assert launcher.warm(1) is False, "warm before the keeper started anything"
    launcher.keep_warm(lambda: False)
    _until(lambda: launcher.warm(1))

    app = world.app(warm_name(0))
    assert app["state"] == "STARTED"
    assert app["tags"][WARM_TAG] == "true"
    assert app["initialCapacity"]["EXECUTOR"]["workerCount"] == 1
    assert app["maximumCapacity"] == {"cpu": "2 vCPU", "memory": "4 GB"}, "more than one job's capacity"
    assert app["autoStopConfiguration"] == {"enabled": True, "idleTimeoutMinutes": 240}

    first = launcher.submit("r-w1", SPEC, workers=1)
    assert (first["application_id"], first["warm"], first["owns_application"]) == (app["id"], True, False)
    assert launcher.warm(1) is False, "the only warm application is taken"
    assert launcher.warm(2) is False, "a run of another size never starts on it"
    launcher.cancel(first)
    _until(lambda: world.job_run(first).state == "CANCELLED")
    assert launcher.release(first) is True
    assert world.app(warm_name(0))["state"] == "STARTED", "the warm application went with its run"

    _until(lambda: launcher.warm(1))
    second = launcher.submit("r-w2", SPEC, workers=1)
    assert (second["application_id"], second["warm"]) == (app["id"], True)
    other_size = launcher.submit("r-w3", SPEC, workers=2)
    assert other_size["owns_application"] is True
    assert other_size["warm"] is False
    assert world.app("replay-r-w3")["initialCapacity"]["EXECUTOR"]["workerCount"] == 2


def test_a_warm_application_with_a_job_run_is_not_taken_again(world: World) -> None:
    launcher = world.launcher(warm=1)
    launcher.keep_warm(lambda: False)
    _until(lambda: launcher.warm(1))
    first = launcher.submit("r-busy-1", SPEC, workers=1)
    second = launcher.submit("r-busy-2", SPEC, workers=1)
    assert second["application_id"] != first["application_id"]
    assert (second["owns_application"], second["warm"]) == (True, False)
    time.sleep(0.5)  # a few keeper passes
    assert launcher.warm(1) is False, "a busy application counted as warm"


def test_a_run_that_took_a_warm_application_at_the_same_moment_as_another_starts_cold(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = world.launcher(warm=1), world.launcher(warm=1)
    ours.keep_warm(lambda: False)
    _until(lambda: ours.warm(1))
    app_id = world.app(warm_name(0))["id"]
    pool = theirs._pool  # the race is staged inside the other daemon's take
    assert pool is not None
    with pool.lock:
        taken = pool.take()  # the other daemon sees it idle ...
    assert taken == app_id
    first = ours.submit("r-race-1", SPEC, workers=1)  # ... this one starts its run there first ...
    monkeypatch.setattr(pool, "take", lambda: taken)
    late = theirs.submit("r-race-2", SPEC, workers=1)  # ... and the other one loses

    assert first["application_id"] == app_id
    assert (late["owns_application"], late["warm"]) == (True, False)
    assert late["application_id"] != app_id
    given_up = [
        run for run in world.endpoint.emr.job_runs.values() if run.request["name"] == "replay-r-race-2"
    ]
    assert sorted(run.application_id == app_id for run in given_up) == [False, True]
    (on_warm,) = [run for run in given_up if run.application_id == app_id]
    _until(lambda: on_warm.state == "CANCELLED")
    assert world.job_run(first).state not in ("CANCELLING", "CANCELLED")


def test_a_submit_retried_after_a_crash_finds_its_run_on_the_warm_application(world: World) -> None:
    launcher = world.launcher(warm=1)
    launcher.keep_warm(lambda: False)
    _until(lambda: launcher.warm(1))
    first = launcher.submit("r-again", SPEC, workers=1)
    again = world.launcher(warm=1).submit("r-again", SPEC, workers=1)  # a restarted daemon
    assert (again["application_id"], again["job_run_id"]) == (first["application_id"], first["job_run_id"])
    assert world.endpoint.emr.start_job_run_calls == 1


@pytest.mark.parametrize(
    ("knob", "reason"),
    [
        ("start_failure", "Failed to provision the initial capacity: no capacity for 2 vCPU"),
        ("refuse_start", "Service quota exceeded: account vCPU limit reached"),
    ],
    ids=["capacity-never-came-up", "start-refused-over-quota"],
)
def test_an_application_that_fails_to_start_its_capacity_is_tried_again_later(
    world: World, knob: str, reason: str
) -> None:
    setattr(world.endpoint.emr, knob, reason)
    launcher = world.launcher(warm=1)
    with capture_logs() as logged:
        launcher.keep_warm(lambda: False)
        warning = _until(
            lambda: next(
                (e["event"] for e in logged if e["log_level"] == "warning" and reason in e["event"]), None
            )
        )
    assert warm_name(0) in warning
    assert "runs start cold meanwhile" in warning
    assert world.app(warm_name(0))["state"] in ("CREATED", "STOPPED")
    assert launcher.warm(1) is False
    cold = launcher.submit("r-cold", SPEC, workers=1)
    assert (cold["owns_application"], cold["warm"]) == (True, False)

    setattr(world.endpoint.emr, knob, None)
    calls = world.endpoint.emr.start_calls
    time.sleep(0.5)  # keeper passes within the back-off: no new start
    assert world.endpoint.emr.start_calls == calls
    world.clock.now += 61  # past the first back-off
    _until(lambda: launcher.warm(1))
    assert world.app(warm_name(0))["state"] == "STARTED"


def test_no_warm_application_is_started_while_every_slot_is_held(world: World) -> None:
    launcher = world.launcher(warm=1)
    launcher.keep_warm(lambda: True)
    _until(lambda: warm_name(0) in world.states())
    time.sleep(0.5)  # a few keeper passes
    assert world.app(warm_name(0))["state"] == "CREATED"
    assert world.endpoint.emr.start_calls == 0
    assert launcher.warm(1) is False


def test_warm_applications_beyond_the_setting_are_deleted_once_idle(world: World) -> None:
    before = world.launcher(warm=2)
    before.keep_warm(lambda: False)
    _until(lambda: all(world.states().get(warm_name(k)) == "STARTED" for k in (0, 1)))
    before.close()
    kept = world.app(warm_name(0))["id"]
    surplus = world.app(warm_name(1))["id"]

    after = world.launcher(warm=1)
    after.keep_warm(lambda: False)
    _until(lambda: world.endpoint.emr.applications[surplus]["state"] == "TERMINATED")
    assert world.endpoint.emr.applications[kept]["state"] == "STARTED"
    after.close()

    none = world.launcher(warm=0)  # none asked for: the keeper only retires what is left
    assert none.warm(1) is None
    none.keep_warm(lambda: False)
    _until(lambda: world.endpoint.emr.applications[kept]["state"] == "TERMINATED")


def test_a_submit_retried_after_its_first_attempt_went_cold_finds_that_run(world: World) -> None:
    launcher = world.launcher(warm=1)
    launcher.keep_warm(lambda: True)  # every slot held: nothing warm yet
    cold = launcher.submit("r-cold-first", SPEC, workers=1)
    assert cold["owns_application"] is True
    launcher.close()

    restarted = world.launcher(warm=1)
    restarted.keep_warm(lambda: False)
    _until(lambda: restarted.warm(1))  # a warm application is idle now ...
    again = restarted.submit("r-cold-first", SPEC, workers=1)  # ... and the retry still finds its run
    assert (again["application_id"], again["job_run_id"]) == (cold["application_id"], cold["job_run_id"])
    assert world.endpoint.emr.start_job_run_calls == 1


def test_a_warm_application_made_under_other_settings_is_replaced_not_taken(world: World) -> None:
    before = world.launcher(warm=1, executors=1)
    before.keep_warm(lambda: False)
    _until(lambda: before.warm(1))
    old = world.app(warm_name(0))["id"]
    before.close()

    after = world.launcher(warm=1, executors=2)  # the default size changed
    cold = after.submit("r-resized", SPEC, workers=2)
    assert (cold["owns_application"], cold["warm"]) == (True, False), "a run took a one-executor application"
    after.keep_warm(lambda: False)
    _until(lambda: after.warm(2))
    renewed = world.app(warm_name(0))
    assert renewed["id"] != old and world.endpoint.emr.applications[old]["state"] == "TERMINATED"
    assert renewed["initialCapacity"]["EXECUTOR"]["workerCount"] == 2


def test_a_twin_left_by_two_daemons_creating_at_once_is_deleted(world: World) -> None:
    launcher = world.launcher(warm=1)
    launcher.keep_warm(lambda: False)
    _until(lambda: launcher.warm(1))
    first = world.app(warm_name(0))["id"]
    emr = aws_client("emr-serverless", world.endpoint.endpoint_url)
    twin = emr.create_application(name=warm_name(0), releaseLabel="emr-spark-8.0.0", type="SPARK")
    _until(lambda: world.endpoint.emr.applications[twin["applicationId"]]["state"] == "TERMINATED")
    assert world.endpoint.emr.applications[first]["state"] == "STARTED"


def test_more_warm_applications_than_runs_at_once_is_refused() -> None:
    with pytest.raises(ValidationError, match="warm_applications=3 is more than max_concurrent_runs=2"):
        EmrSettings(warm_applications=3, max_concurrent_runs=2)
