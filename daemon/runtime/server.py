"""`replayd`: the Replay Service process — API, watcher, scheduler — wired from one Settings.

    replayd                           serve: the API, the watcher and the pipeline scheduler
    replayd package [--with-venv]     (EMR) build the job artifact and upload it under its content hash

`kill -HUP <replayd>` reads the sources catalog again: the log says which sources were added, removed
or changed, or why the file was refused (the catalog in use then stays as it was).

This is the one place that knows every implementation: adapters are built here, once, from the
settings, and handed to the use cases as the ports they depend on.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlencode

import structlog
import uvicorn
from fastapi import FastAPI

from daemon.adapters.cluster_launcher import ClusterSparkLauncher
from daemon.adapters.emr_launcher import EmrServerlessLauncher
from daemon.adapters.kafka_consumer_group_admin import KafkaConsumerGroupAdmin
from daemon.adapters.kafka_dead_letters import KafkaDeadLetters
from daemon.adapters.kafka_progress_source import KafkaProgressSource
from daemon.adapters.kafka_run_control import KafkaRunControlChannel
from daemon.adapters.kafka_topic_admin import KafkaTopicAdmin
from daemon.adapters.lake_table_stats import LakeTableStats
from daemon.adapters.local_launcher import LocalSparkLauncher, default_spark_submit
from daemon.adapters.log_notifier import LogNotifier
from daemon.adapters.packaging import package_and_upload
from daemon.adapters.slack_notifier import slack_notifier_from_settings
from daemon.adapters.spark_class_archive import ClassArchive, default_directory
from daemon.adapters.table_catalogs import TableCatalogs
from daemon.config.lake_catalogs import session_catalog
from daemon.config.logs import configure_logging
from daemon.config.settings import Settings, load_settings
from daemon.contract.models import PageLinkOut
from daemon.core.clusters import DEFAULT_CLUSTER
from daemon.core.errors import BadRequest, ConfigError, ReplayError, Unavailable
from daemon.core.ids import USER_ID_PATTERN
from daemon.core.states import RunKind
from daemon.pages.links import PageKeys, page_secret
from daemon.runtime.api import create_api
from daemon.runtime.api_guard import new_personal_token
from daemon.runtime.metrics import render_metrics
from daemon.runtime.pages import add_pages
from daemon.runtime.readiness import readiness_for
from daemon.runtime.scheduler import PipelineScheduler
from daemon.runtime.slow_calls import SlowCalls
from daemon.runtime.watcher import Watcher, WatcherTiming
from daemon.usecases.auto_steer import AutoSteer
from daemon.usecases.catalog import Catalog, CatalogChange, load_catalog
from daemon.usecases.consumer_groups import ConsumerGroups
from daemon.usecases.drains import DrainFollower, DrainTiming
from daemon.usecases.janitor import IdlePolicy, Janitor
from daemon.usecases.job_specs import build_spec
from daemon.usecases.pipeline_service import PipelineService
from daemon.usecases.ports import (
    ApplicationDeleter,
    Clusters,
    ConsumerGroupAdmin,
    DeadLetters,
    Launcher,
    Notifier,
    ProgressSource,
    RunControlChannel,
    TopicAdmin,
)
from daemon.usecases.replays import ReplayService
from daemon.usecases.run_control import RunControlService
from daemon.usecases.topic_ttl import TopicTtl
from store import Store
from store.migrate import upgrade
from store.models import Run

log = structlog.get_logger(__name__)


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Daemon:
    """The assembled service: an ASGI app plus the watcher thread that drives runs."""

    settings: Settings
    store: Store
    service: ReplayService
    run_control: RunControlService
    watcher: Watcher
    app: FastAPI
    progress: Clusters[ProgressSource]
    control: Clusters[RunControlChannel]
    pipelines: PipelineService
    scheduler: PipelineScheduler
    catalog: Catalog
    launcher: Launcher
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start_background(self) -> None:
        """The watcher thread and the pipeline scheduler: everything that runs without a request."""
        self._thread = threading.Thread(target=self.watcher.run_forever, args=(self._stop,), daemon=True)
        self._thread.start()
        self.scheduler.start()
        cap = self.launcher.max_concurrent_runs
        self.launcher.keep_warm(lambda: cap is not None and self.store.runs.jobs_in_flight() >= cap)

    def stop(self) -> None:
        self.scheduler.stop()
        self._stop.set()
        self.watcher.wake()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.launcher.close()
        for source in self.progress.made():
            source.close()
        for channel in self.control.made():
            channel.close()
        self.store.close()


def _driver_here(settings: Settings) -> dict[str, Any]:
    """What the local and the Spark-cluster launchers share: drivers started on this machine."""
    spark_submit = settings.spark_submit or default_spark_submit()
    archive_dir = settings.local_class_archive_dir or default_directory()
    return {
        "runs_dir": settings.state_dir / "runs",
        "spark_submit": spark_submit,
        "max_concurrent_runs": settings.local_max_concurrent_runs,
        "run_dirs_keep_s": settings.local_run_dirs_keep_days * 86400,
        "jars": tuple(settings.local_jars),
        "class_archive": ClassArchive.for_install(archive_dir, spark_submit)
        if settings.local_class_archive
        else None,
    }


def build_launcher(settings: Settings) -> Launcher:
    if settings.launcher == "spark":
        assert settings.spark_master is not None, "the settings require it with launcher=spark"
        return ClusterSparkLauncher(
            master=settings.spark_master,
            executor_cores=settings.spark_executor_cores,
            executor_memory=settings.spark_executor_memory,
            executor_wait_s=settings.spark_executor_wait_s,
            executor_python=settings.spark_python,
            **_driver_here(settings),
        )
    if settings.launcher == "local":
        return LocalSparkLauncher(
            standby_workers=settings.local_workers if settings.local_standby else None,
            standby_max_idle_s=settings.local_standby_max_idle_s,
            **_driver_here(settings),
        )
    import boto3  # only an EMR daemon pays for it (a few tenths of a second of every start)

    emr = settings.emr
    kwargs = emr.client_kwargs()
    s3 = boto3.client("s3", **kwargs)
    artifacts = package_and_upload(emr, s3, with_venv=False)
    return EmrServerlessLauncher(
        emr_client=boto3.client("emr-serverless", **kwargs), s3_client=s3, settings=emr, artifacts=artifacts
    )


def _private_state(settings: Settings) -> None:
    """The state directory 0700 and a SQLite store 0600 from its first byte: run specs carry the Kafka
    password, and the store holds every request and audit entry."""
    try:
        settings.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        settings.state_dir.chmod(0o700)
        file = re.fullmatch(r"sqlite(?:\+\w+)?:///([^?]+)(?:\?.*)?", settings.db_url)
        if file is not None and file.group(1) != ":memory:":
            database = Path(file.group(1))
            database.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.close(os.open(database, os.O_WRONLY | os.O_CREAT, 0o600))
            database.chmod(0o600)
    except OSError as exc:
        raise ConfigError(f"the state directory or database file cannot be made private: {exc}") from exc


def build_daemon(
    settings: Settings,
    *,
    catalog: Catalog | None = None,
    notifier: Notifier | None = None,
    launcher: Launcher | None = None,
    clock: Callable[[], datetime] = utc_now,
    timing: WatcherTiming | None = None,
) -> Daemon:
    _private_state(settings)
    catalog = catalog or load_catalog(
        settings.catalog_path,
        lake_catalogs={name: lake.type for name, lake in settings.lake_catalogs.items()},
        session_catalog=session_catalog(settings.lake_catalogs),
        kafka_clusters=settings.kafka_cluster_names,
    )
    upgrade(settings.db_url)
    store = Store(settings.db_url)
    names = settings.kafka_cluster_names  # each cluster's clients are made when it is first used
    topics: Clusters[TopicAdmin] = Clusters(
        lambda name: KafkaTopicAdmin(config=settings.kafka_config(name)), names
    )
    group_admin: Clusters[ConsumerGroupAdmin] = Clusters(
        lambda name: KafkaConsumerGroupAdmin(config=settings.kafka_config(name)), names
    )
    groups = ConsumerGroups(
        groups=group_admin,
        catalog=catalog,
        store=store,
        admins=list(settings.admins),
        sample_s=settings.lag_sample_s,
    )
    table_stats = LakeTableStats(catalogs=TableCatalogs(settings.lake_catalogs))
    table_stats.prepare(source.table.format for source in catalog.sources.values())
    launcher = launcher or build_launcher(settings)
    notifier = notifier or slack_notifier_from_settings(settings) or LogNotifier()
    progress: Clusters[ProgressSource] = Clusters(
        lambda name: KafkaProgressSource(
            kafka_config=settings.kafka_config(name), topic=settings.progress_topic
        ),
        names,
    )
    owner = settings.instance_id or f"{socket.gethostname()}:{settings.daemon_port}"
    result_dir = settings.state_dir / "runs"

    control: Clusters[RunControlChannel] = Clusters(
        lambda name: KafkaRunControlChannel(
            config=settings.kafka_config(name),
            topic=settings.control_topic,
            topics=topics[name],
            retention_ms=settings.control_retention_ms,
        ),
        names,
    )
    try:
        control[DEFAULT_CLUSTER].ensure_topic()  # another cluster's: at its first run's launch
    except Unavailable as exc:  # the broker may come later: the first change or launch creates it
        log.warning("control topic not ensured at start-up", topic=settings.control_topic, error=str(exc))

    def spec_for(run: Run) -> str:
        result = Path(result_dir / run.id / "result.json").resolve()
        offset = None
        if run.kind != RunKind.RECONCILE and run.tps > 0:
            # first the offset, then the changes: none falls between
            offset = control[run.options.cluster].end_offset()
            run = store.runs.get(run.id)
        return build_spec(
            run, catalog=catalog, settings=settings, result_uri=str(result), control_offset=offset
        ).to_json()

    run_control = RunControlService(
        settings=settings, catalog=catalog, store=store, channel=control, notifier=notifier, clock=clock
    )
    drain_watch = DrainFollower(
        store=store,
        groups=group_admin,
        notifier=notifier,
        owner=owner,
        timing=DrainTiming(
            interval_s=settings.watch_interval_s,
            timeout_s=settings.watch_timeout_s,
            notify_every_s=settings.progress_notify_every_s,
            lease_ttl_s=settings.lease_ttl_s,
        ),
    )

    auto_steer = AutoSteer(store=store, groups=group_admin, control=run_control)

    def on_tick() -> None:
        """Each hook on its own: one failing (e.g. the broker is away) does not skip the others."""
        for hook in (run_control.resend_unsent, drain_watch.tick, auto_steer.tick):
            try:
                hook()
            except Exception:
                log.exception("watcher tick hook failed", hook=getattr(hook, "__qualname__", "?"))

    watcher = Watcher(
        store=store,
        launcher=launcher,
        notifier=notifier,
        build_spec=spec_for,
        progress=progress,
        owner=owner,
        timing=timing
        or WatcherTiming(
            poll_s=settings.watcher_poll_s,
            lease_ttl_s=settings.lease_ttl_s,
            progress_every_s=settings.progress_notify_every_s,
            max_pause_s=settings.max_pause_s,
        ),
        on_tick=on_tick,
        before_launch=drain_watch.baseline,
    )
    launcher.notify_on_change(watcher.wake)
    service = ReplayService(
        settings=settings,
        catalog=catalog,
        store=store,
        topics=topics,
        table_stats=table_stats,
        clock=clock,
        wake_watcher=watcher.wake,
        rewind_hint=groups.rewind_instead,
        launch_slots=launcher.max_concurrent_runs,
        warm=launcher.warm,
    )
    janitor = Janitor(
        store=store,
        catalog=catalog,
        topics=topics,
        notifier=notifier,
        clock=clock,
        admins=list(settings.admins),
        policy=IdlePolicy(
            idle_after_days=settings.idle_after_days,
            grace_days=settings.idle_grace_days,
            keep_days=settings.idle_keep_days,
        ),
        applications=launcher if isinstance(launcher, ApplicationDeleter) else None,
        wake_watcher=watcher.wake,
    )
    scheduler_box: list[PipelineScheduler] = []
    pipelines = PipelineService(
        settings=settings,
        catalog=catalog,
        store=store,
        topics=topics,
        table_stats=table_stats,
        notifier=notifier,
        clock=clock,
        wake_watcher=watcher.wake,
        deprovision=lambda pipeline, reason: janitor.deprovision(
            pipeline, reason=reason, release_timeout_s=0.0, stop_timeout_s=0.0
        ),
        wake_scheduler=lambda: scheduler_box[0].wake() if scheduler_box else None,
    )
    topic_ttl = TopicTtl(
        store=store,
        catalog=catalog,
        topics=topics,
        notifier=notifier,
        clock=clock,
        ttl=timedelta(hours=settings.replay_topic_ttl_hours),
        notice=timedelta(hours=settings.replay_topic_notice_hours),
        # two passes at the least, and never less than a create in flight could take
        stray_grace=timedelta(seconds=max(5.0, 2 * settings.replay_topic_check_s)),
    )
    scheduler = PipelineScheduler(
        store=store,
        fire=pipelines.fire,
        clock=clock,
        janitor=janitor.run_once,
        janitor_schedule=settings.janitor_schedule,
        deprovisions=janitor.finish_pending,
        deprovisions_every_s=settings.deprovision_check_s,
        topic_ttl=topic_ttl.run_once,
        topic_ttl_every_s=settings.replay_topic_check_s,
    )
    scheduler_box.append(scheduler)
    assert settings.api_token is not None
    page_keys = PageKeys(
        page_secret(settings.api_token.get_secret_value()),
        link_s=settings.page_link_minutes * 60,
        session_s=settings.page_session_hours * 3600,
    )

    def page_links(user: str, run_id: str | None) -> PageLinkOut:
        path = f"/runs/{run_id}" if run_id is not None else "/"
        base = (settings.pages_url or settings.daemon_url).rstrip("/")
        query = urlencode({"token": page_keys.link_token(user, path)})
        expires = clock() + timedelta(seconds=page_keys.link_s)
        return PageLinkOut(url=f"{base}/login?{query}", expires_at=expires)

    app = create_api(
        service,
        api_token=settings.api_token.get_secret_value(),
        user_tokens=settings.user_token_digests(),
        pipelines=pipelines,
        janitor=janitor,
        run_control=run_control,
        groups=groups,
        metrics=lambda: render_metrics(store),
        readiness=readiness_for(settings, store=store, catalog=catalog),
        slow_calls=SlowCalls(per_user=settings.max_slow_calls_per_user, total=settings.max_slow_calls),
        page_links=page_links,
    )
    letters: Clusters[DeadLetters] = Clusters(
        lambda name: KafkaDeadLetters(config=settings.kafka_config(name)), names
    )
    add_pages(
        app,
        keys=page_keys,
        service=service,
        pipelines=pipelines,
        store=store,
        catalog=catalog,
        dead_letters=letters,
        janitor=janitor,
    )
    return Daemon(
        settings=settings,
        store=store,
        service=service,
        run_control=run_control,
        watcher=watcher,
        app=app,
        progress=progress,
        control=control,
        pipelines=pipelines,
        scheduler=scheduler,
        catalog=catalog,
        launcher=launcher,
    )


def reload_catalog(catalog: Catalog) -> CatalogChange | None:
    """Read the catalog file again (SIGHUP) and log what changed; a bad file is logged and refused."""
    try:
        change = catalog.reload()
    except ConfigError as exc:
        log.error("catalog reload refused: the catalog in use stays", path=catalog.path, problem=str(exc))
        return None
    log.info(
        "catalog reloaded" if change.any else "catalog reloaded: nothing changed",
        path=catalog.path,
        added=list(change.added),
        removed=list(change.removed),
        changed=list(change.changed),
        sources=len(catalog.sources),
    )
    return change


def reload_on_hangup(catalog: Catalog) -> None:
    """SIGHUP reloads the catalog in a thread of its own, so a reload never runs inside whatever the main
    thread (the event loop) was doing when the signal came."""
    signal.signal(
        signal.SIGHUP,
        lambda *_: threading.Thread(target=reload_catalog, args=(catalog,), name="catalog-reload").start(),
    )


def package(settings: Settings, *, with_venv: bool, out: TextIO) -> int:
    """`replayd package`: build the job artifact and upload it under its content hash (EMR)."""
    import boto3

    settings.emr.require_launch()
    s3 = boto3.client("s3", **settings.emr.client_kwargs())
    uris = package_and_upload(settings.emr, s3, with_venv=with_venv)
    print(json.dumps(uris, indent=2, sort_keys=True), file=out)
    return 0


def _arguments(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="replayd", description="The Replay Service.")
    commands = parser.add_subparsers(dest="command")
    packaging = commands.add_parser("package", help="(EMR) build the job artifact and upload it to S3")
    packaging.add_argument("--with-venv", action="store_true", help="also build the job's virtualenv")
    token = commands.add_parser("token", help="make a personal API token for one user (the CLI's)")
    token.add_argument("user", help="the Slack user id the token acts as, e.g. U0123ABCD")
    return parser.parse_args(argv)


def print_new_token(user: str, out: TextIO) -> int:
    """Print a new personal token (for its user only) and the settings entry that admits it."""
    if not USER_ID_PATTERN.fullmatch(user):
        raise BadRequest(f"'{user}' is not a Slack user id (like U0123ABCD)")
    token, entry = new_personal_token(user)
    print(f"token for {user} (give it to them only; it is not stored anywhere): {token}", file=out)
    print(f"add to REPLAY_USER_TOKENS (comma-separated) and restart replayd: {entry}", file=out)
    return 0


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Serve (no subcommand) or run one subcommand; the exit code: 0 done, 2 bad settings, 1 failed."""
    args = _arguments(sys.argv[1:] if argv is None else argv)
    if args.command == "token":
        try:
            return print_new_token(args.user, out)
        except BadRequest as exc:
            print(f"replayd: {exc}", file=err)
            return 2
    if args.command == "package":
        try:
            return package(load_settings(), with_venv=args.with_venv, out=out)
        except (BadRequest, ConfigError) as exc:
            print(f"replayd: {exc}", file=err)
            return 2
        except ReplayError as exc:
            print(f"replayd: {exc}", file=err)
            return 1
    serve()
    return 0


def serve() -> None:
    try:
        settings = load_settings()
        settings.require("api_token")
        configure_logging(
            log_format=settings.log_format, level=settings.log_level, secrets=settings.secret_values()
        )
        daemon = build_daemon(settings)
    except ConfigError as exc:
        print(f"replayd: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    daemon.start_background()
    reload_on_hangup(daemon.catalog)
    log.info("replayd listening", host=settings.daemon_host, port=settings.daemon_port)
    try:
        uvicorn.run(daemon.app, host=settings.daemon_host, port=settings.daemon_port, log_config=None)
    finally:
        daemon.stop()


if __name__ == "__main__":
    sys.exit(main())
