"""The janitor never removes what someone is using: each test here failed before the fix.

"Delete now" only for a pipeline in its idle period, and only confirmed; de-provisioning pauses the
pipeline and stops its running job (the real watcher and local launcher) before the topic goes; a
Keep that lands while a pass runs wins; a prompt recorded but never sent (a crash) is sent by the
next pass and the grace period counts from then; an EMR application still stopping when the
pipeline was archived is deleted by a restarted daemon (the local EMR Serverless endpoint).
"""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from daemon.adapters.emr_launcher import EmrServerlessLauncher
from daemon.adapters.local_launcher import LocalSparkLauncher
from daemon.adapters.log_notifier import LogNotifier
from daemon.core.errors import Conflict
from daemon.core.states import RunKind, RunState
from daemon.runtime.watcher import Watcher, WatcherTiming
from daemon.usecases.ports import Clusters, JobState
from tests.fixtures.aws import AwsClients, aws_client
from tests.fixtures.control_job import standin_spark_submit
from tests.fixtures.daemon import OWNER
from tests.fixtures.emr_launcher import ARTIFACTS, BUCKET, FakeClock, emr_settings
from tests.fixtures.janitor import CO_OWNER, T0, World, dms, new_pipeline, topic_exists
from tests.fixtures.local_emr import LocalEmrEndpoint, local_emr  # noqa: F401 (a fixture)
from tests.fixtures.progress import NoBeacons
from tests.fixtures.spark import job_spec

pytestmark = [pytest.mark.kafka]


def _due(world: World, pipeline_id: str) -> None:
    """Idle, asked (every prompt delivered), and past the grace period."""
    world.clock.advance(days=31)
    world.janitor.run_once()
    world.clock.advance(days=8)
    assert world.store.pipelines.get(pipeline_id).delete_after is not None


def test_delete_now_is_refused_for_a_pipeline_that_is_not_idle_and_without_a_confirmation(
    world: World,
) -> None:
    pipeline = new_pipeline(world)

    with pytest.raises(Conflict, match="is not idle"):
        world.janitor.delete_now(OWNER, pipeline.id, confirm=True)
    world.clock.advance(days=31)
    world.janitor.run_once()  # now idle: its owners are asked
    with pytest.raises(Conflict, match="needs an explicit confirmation"):
        world.janitor.delete_now(OWNER, pipeline.id, confirm=False)
    world.janitor.keep(CO_OWNER, pipeline.id)
    with pytest.raises(Conflict, match="is not idle"):  # kept: no longer in an idle period
        world.janitor.delete_now(OWNER, pipeline.id, confirm=True)

    assert world.store.pipelines.get(pipeline.id).state == "active"
    assert topic_exists(world, pipeline.topic)
    refused = [e for e in world.store.audit.list(target=pipeline.id) if e.action == "delete"]
    assert [e.outcome for e in refused] == ["refused"] * 3


def test_deprovisioning_pauses_the_pipeline_and_stops_its_running_job_first(
    world: World, tmp_path: Path, sample_table: Path
) -> None:
    pipeline = new_pipeline(world)
    _due(world, pipeline.id)
    run = world.store.runs.create(
        kind=RunKind.PIPELINE,
        pipeline_id=pipeline.id,
        source="orders",
        topic=pipeline.topic,
        tps=1,
        requester=OWNER,
        watermark_column="updated_at",
    )
    spec = json.dumps(job_spec(sample_table, world.bootstrap, pipeline.topic, run_id=run.id, tps=1))
    launcher = LocalSparkLauncher(
        runs_dir=tmp_path / "runs", spark_submit=str(standin_spark_submit(tmp_path))
    )
    watcher = Watcher(
        store=world.store,
        launcher=launcher,
        notifier=LogNotifier(),
        build_spec=lambda _run: spec,
        progress=Clusters.one(NoBeacons()),
        owner="test",
        timing=WatcherTiming(poll_s=0.2),
    )
    watcher.tick()
    handle = world.store.runs.get(run.id).launcher_handle
    assert handle is not None and launcher.state(handle) == JobState.RUNNING
    stop = threading.Event()
    watching = threading.Thread(target=watcher.run_forever, args=(stop,), daemon=True)
    watching.start()
    try:
        world.restart(wake_watcher=watcher.wake, stop_timeout_s=30)
        world.janitor.run_once()
    finally:
        stop.set()
        watcher.wake()
        watching.join(timeout=10)

    assert world.store.runs.get(run.id).state == RunState.CANCELLED
    deadline = time.monotonic() + 15
    while launcher.state(handle) == JobState.RUNNING and time.monotonic() < deadline:
        time.sleep(0.2)
    assert launcher.state(handle) != JobState.RUNNING, "the job publishes on into a deleted pipeline's topic"
    assert world.store.pipelines.get(pipeline.id).state == "archived"
    assert not topic_exists(world, pipeline.topic)
    by_janitor = [(e.action, e.target) for e in reversed(world.store.audit.list()) if e.actor == "janitor"]
    assert by_janitor == [("pause", pipeline.id), ("cancel", run.id), ("deprovision", pipeline.id)]


def test_a_keep_that_lands_while_a_pass_runs_wins_and_one_after_removal_began_is_refused(
    world: World,
) -> None:
    pipeline = new_pipeline(world)
    _due(world, pipeline.id)
    read = world.store.pipelines.get(pipeline.id)  # what the pass read before deciding

    world.janitor.keep(CO_OWNER, pipeline.id)  # the owner's click, between the pass's read and its delete
    world.janitor.tend(read, world.clock())

    kept = world.store.pipelines.get(pipeline.id)
    assert (kept.state, kept.snoozed_by, kept.deprovision_reason) == ("active", CO_OWNER, None)
    assert topic_exists(world, pipeline.topic)
    assert dms(world, pipeline, "removed") == []

    world.clock.advance(days=15)  # the snooze is over: asked again, no answer
    world.janitor.run_once()
    world.clock.advance(days=8)
    read = world.store.pipelines.get(pipeline.id)
    world.store.pipelines.begin_deprovision(
        pipeline.id, reason="no answer", read=read
    )  # the pass's first step
    with pytest.raises(Conflict, match="already being de-provisioned"):
        world.janitor.keep(OWNER, pipeline.id)
    world.janitor.run_once()
    assert world.store.pipelines.get(pipeline.id).state == "archived"


def test_a_prompt_recorded_but_never_sent_is_sent_by_the_next_pass_and_the_grace_counts_from_then(
    world: World,
) -> None:
    pipeline = new_pipeline(world)
    world.clock.advance(days=31)
    # The crashed pass got this far: it opened the idle period and recorded both prompts, then died
    # before Slack was called.
    start = T0 + timedelta(days=30)
    world.store.pipelines.update(pipeline.id, idle_since=start)
    for owner in (OWNER, CO_OWNER):
        key = f"idle:{pipeline.id}:{start.isoformat()}:{owner}"
        world.store.notifications.record_once(key, pipeline_id=pipeline.id, kind="idle-prompt")

    world.clock.advance(minutes=1)
    world.restart()
    world.janitor.run_once()  # so soon, the records may be another pass's sends in flight: left alone
    assert dms(world, pipeline, "idle") == []
    assert world.store.pipelines.get(pipeline.id).delete_after is None

    world.clock.advance(hours=1)
    world.janitor.run_once()
    delivered = world.clock()
    assert sorted(dms(world, pipeline, "idle")) == ["D0COOWNER", "D0OWNER1"]
    assert world.store.pipelines.get(pipeline.id).delete_after == delivered + timedelta(days=7)

    world.clock.advance(days=7, minutes=-1)
    world.janitor.run_once()
    assert world.store.pipelines.get(pipeline.id).state == "active"
    assert len(dms(world, pipeline, "idle")) == 2  # delivered once: never sent twice
    world.clock.advance(minutes=2)
    world.janitor.run_once()
    assert world.store.pipelines.get(pipeline.id).state == "archived"


def test_an_emr_application_still_stopping_at_removal_is_deleted_after_a_restart(
    world: World,
    aws: AwsClients,
    local_emr: LocalEmrEndpoint,  # noqa: F811 (the fixture imported above)
) -> None:
    aws.s3.create_bucket(Bucket=BUCKET)
    time_ = FakeClock()  # the launcher's polling time: 300 s of waiting pass at once
    launcher = EmrServerlessLauncher(
        emr_client=aws_client("emr-serverless", local_emr.endpoint_url),
        s3_client=aws.s3,
        settings=emr_settings(aws),
        artifacts=ARTIFACTS,
        poll_interval_s=7.0,
        sleep=time_.sleep,
        monotonic=time_.monotonic,
    )
    app_id = launcher.ensure_application("replay-pipeline-janitor", 1)
    applications = local_emr.emr.applications
    applications[app_id]["state"] = "STOPPING"  # EMR takes its time stopping it: longer than we wait
    pipeline = new_pipeline(world, emr_application_id=app_id)
    world.restart(applications=launcher)
    _due(world, pipeline.id)

    world.janitor.run_once()
    archived = world.store.pipelines.get(pipeline.id)
    assert (archived.state, archived.application_release) == ("archived", app_id)
    assert applications[app_id]["state"] == "STOPPING"

    applications[app_id]["state"] = "STOPPED"  # it stopped while the daemon was down
    world.restart(applications=launcher)
    world.janitor.run_once()

    assert applications[app_id]["state"] == "TERMINATED"
    assert world.store.pipelines.get(pipeline.id).application_release is None
