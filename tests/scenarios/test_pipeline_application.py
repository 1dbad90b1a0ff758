"""A pipeline's own EMR application: made on its first run, shared by its runs, deleted by de-provisioning.

The real watcher drives runs through the EMR launcher on the local EMR Serverless endpoint; the jobs'
artifacts are not uploaded, so each job run fails to start (no Spark needed): what is checked is where
each run goes and what is left afterwards. Before, every pipeline run got a one-time application of
its own (deleted with the run), `pipelines.emr_application_id` stayed empty and the janitor's
"delete its EMR application" step could never fire.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from daemon.adapters.emr_launcher import EmrServerlessLauncher, pipeline_application_name
from daemon.adapters.log_notifier import LogNotifier
from daemon.core.states import TERMINAL_RUN_STATES, RunKind
from daemon.runtime.watcher import Watcher
from daemon.usecases.ports import Clusters
from store.models import Run
from tests.fixtures.aws import AwsClients, aws_client
from tests.fixtures.daemon import OWNER
from tests.fixtures.emr_launcher import ARTIFACTS, BUCKET, FakeClock, emr_settings
from tests.fixtures.janitor import World, new_pipeline
from tests.fixtures.local_emr import LocalEmrEndpoint, local_emr  # noqa: F401 (a fixture)
from tests.fixtures.progress import NoBeacons

pytestmark = [pytest.mark.kafka]

LIVE = {"CREATED", "STARTED"}


def _launcher(aws: AwsClients, endpoint: LocalEmrEndpoint) -> EmrServerlessLauncher:
    aws.s3.create_bucket(Bucket=BUCKET)
    clock = FakeClock()  # the launcher's own polling (application teardown) passes at once
    return EmrServerlessLauncher(
        emr_client=aws_client("emr-serverless", endpoint.endpoint_url),
        s3_client=aws.s3,
        settings=emr_settings(aws),
        artifacts=ARTIFACTS,
        poll_interval_s=1.0,
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )


def _drive(world: World, watcher: Watcher, run: Run, timeout_s: float = 60.0) -> Run:
    """Tick until the run ended and its launcher resources were given back."""
    deadline = time.monotonic() + timeout_s
    while (now := world.store.runs.get(run.id)).state not in TERMINAL_RUN_STATES:
        assert time.monotonic() < deadline, f"run {run.id} still {now.state}"
        watcher.tick()
        time.sleep(0.2)
    for _ in range(3):  # a one-time application is stopped, then deleted, one step per tick
        watcher.tick()
    return now


def _run(world: World, pipeline_id: str | None, topic: str) -> Run:
    fields: dict[str, Any] = {"kind": RunKind.REPLAY}
    if pipeline_id is not None:
        fields = {"kind": RunKind.PIPELINE, "pipeline_id": pipeline_id, "watermark_column": "updated_at"}
    return world.store.runs.create(source="orders", topic=topic, tps=10, requester=OWNER, **fields)


def test_a_pipelines_runs_share_its_application_until_de_provisioning_deletes_it(
    world: World,
    aws: AwsClients,
    local_emr: LocalEmrEndpoint,  # noqa: F811 (the fixture imported above)
) -> None:
    launcher = _launcher(aws, local_emr)
    watcher = Watcher(
        store=world.store,
        launcher=launcher,
        notifier=LogNotifier(),
        build_spec=lambda run: json.dumps({"run_id": run.id}),
        progress=Clusters.one(NoBeacons()),
        owner="test",
    )
    applications = local_emr.emr.applications
    pipeline = new_pipeline(world)

    first = _drive(world, watcher, _run(world, pipeline.id, pipeline.topic))
    app_id = world.store.pipelines.get(pipeline.id).emr_application_id
    assert app_id is not None, "the pipeline's first run recorded no application"
    assert (first.launcher_handle or {})["application_id"] == app_id
    assert applications[app_id]["name"] == pipeline_application_name(pipeline.id)
    assert applications[app_id]["state"] in LIVE, "the pipeline's application went with its run"

    assert (first.launcher_handle or {})["warm"] is False, "a new application cannot be warm"

    second = _drive(world, watcher, _run(world, pipeline.id, pipeline.topic))
    assert (second.launcher_handle or {})["application_id"] == app_id
    assert (second.launcher_handle or {})["warm"] is True, "its application was still started"
    assert applications[app_id]["state"] in LIVE
    assert world.store.pipelines.get(pipeline.id).emr_application_id == app_id
    assert [a for a in applications.values() if a["name"].startswith("replay-pipeline-")] == [
        applications[app_id]
    ]

    one_off = _drive(world, watcher, _run(world, None, "replay.orders.one-off"))
    own = (one_off.launcher_handle or {})["application_id"]
    assert own != app_id
    assert applications[own]["name"] == f"replay-{one_off.id}"
    assert applications[own]["state"] == "TERMINATED", "a one-off's application outlived its run"
    assert applications[app_id]["state"] in LIVE

    assert applications[app_id]["state"] == "STARTED", "de-provisioning is to meet a warm application"
    world.restart(applications=launcher)
    world.clock.advance(days=31)
    world.janitor.run_once()  # idle: its owners are asked
    world.clock.advance(days=8)
    world.janitor.run_once()  # no answer within the grace period: de-provisioned

    removed = world.store.pipelines.get(pipeline.id)
    assert (removed.state, removed.application_release) == ("archived", None)
    assert applications[app_id]["state"] == "TERMINATED"
    deprovision = [e for e in world.store.audit.list(target=pipeline.id) if e.action == "deprovision"]
    assert f"its EMR application {app_id}" in deprovision[0].detail["removed"]


def test_an_application_recorded_once_de_provisioning_began_is_released_too(world: World) -> None:
    """A run launched while the removal began records its pipeline's application after the janitor
    copied what it had to release: that application must be released all the same."""
    pipeline = new_pipeline(world)
    world.store.pipelines.begin_deprovision(pipeline.id, reason="test", read=pipeline)

    world.store.pipelines.record_application(pipeline.id, "00f1a2b3c4d5e6f7")

    after = world.store.pipelines.get(pipeline.id)
    assert (after.emr_application_id, after.application_release) == ("00f1a2b3c4d5e6f7",) * 2
    assert [p.id for p in world.store.pipelines.awaiting_release()] == [pipeline.id]
