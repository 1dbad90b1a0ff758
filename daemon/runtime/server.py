"""`replayd`: the Replay Service process — API, watcher, scheduler — wired from one Settings.

    replayd                           serve: the API, the watcher and the pipeline scheduler
    replayd package [--with-venv]     (EMR) build the job artifact and upload it under its content hash

This is the one place that knows every implementation: adapters are built here, once, from the
settings, and handed to the use cases as the ports they depend on.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import boto3
import structlog
import uvicorn
from fastapi import FastAPI

from daemon.adapters.emr_launcher import EmrServerlessLauncher
from daemon.adapters.kafka_admin import KafkaAdmin
from daemon.adapters.local_launcher import LocalSparkLauncher
from daemon.adapters.log_notifier import LogNotifier
from daemon.adapters.packaging import package_and_upload
from daemon.adapters.progress_reader import ProgressProbe
from daemon.adapters.slack_notifier import slack_notifier_from_settings
from daemon.adapters.table_stats import ParquetTableStats
from daemon.config.logs import configure_logging
from daemon.config.settings import Settings, load_settings
from daemon.core.errors import BadRequest, ConfigError, ReplayError
from daemon.runtime.api import create_api
from daemon.runtime.scheduler import PipelineScheduler
from daemon.runtime.watcher import Watcher, WatcherTiming
from daemon.usecases.catalog import Catalog, load_catalog
from daemon.usecases.janitor import IdlePolicy, Janitor
from daemon.usecases.job_specs import build_spec
from daemon.usecases.pipeline_service import PipelineService
from daemon.usecases.ports import ApplicationDeleter, Launcher, Notifier, ProgressSource
from daemon.usecases.replays import ReplayService
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
    watcher: Watcher
    app: FastAPI
    progress: ProgressSource
    pipelines: PipelineService
    scheduler: PipelineScheduler
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start_background(self) -> None:
        """The watcher thread and the pipeline scheduler: everything that runs without a request."""
        self._thread = threading.Thread(target=self.watcher.run_forever, args=(self._stop,), daemon=True)
        self._thread.start()
        self.scheduler.start()

    def stop(self) -> None:
        self.scheduler.stop()
        self._stop.set()
        self.watcher.wake()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.progress.close()
        self.store.close()


def build_launcher(settings: Settings) -> Launcher:
    if settings.launcher == "local":
        return LocalSparkLauncher(
            runs_dir=settings.state_dir / "runs",
            spark_submit=settings.spark_submit or None,
            max_concurrent_runs=settings.local_max_concurrent_runs,
        )
    emr = settings.emr
    kwargs = emr.client_kwargs()
    s3 = boto3.client("s3", **kwargs)
    artifacts = package_and_upload(emr, s3, with_venv=False)
    return EmrServerlessLauncher(
        emr_client=boto3.client("emr-serverless", **kwargs), s3_client=s3, settings=emr, artifacts=artifacts
    )


def build_daemon(
    settings: Settings,
    *,
    catalog: Catalog | None = None,
    notifier: Notifier | None = None,
    launcher: Launcher | None = None,
    clock: Callable[[], datetime] = utc_now,
    timing: WatcherTiming | None = None,
) -> Daemon:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    catalog = catalog or load_catalog(settings.catalog_path)
    upgrade(settings.db_url)
    store = Store(settings.db_url)
    topics = KafkaAdmin(config=settings.kafka_config())
    table_stats = ParquetTableStats()
    launcher = launcher or build_launcher(settings)
    notifier = notifier or slack_notifier_from_settings(settings) or LogNotifier()
    progress = ProgressProbe(kafka_config=settings.kafka_config(), topic=settings.progress_topic)
    owner = settings.instance_id or f"{socket.gethostname()}:{settings.daemon_port}"
    result_dir = settings.state_dir / "runs"

    def spec_for(run: Run) -> str:
        result = Path(result_dir / run.id / "result.json").resolve()
        return build_spec(run, catalog=catalog, settings=settings, result_uri=str(result)).to_json()

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
        ),
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
        wake_scheduler=lambda: scheduler_box[0].wake() if scheduler_box else None,
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
    )
    scheduler = PipelineScheduler(
        store=store,
        fire=pipelines.fire,
        clock=clock,
        janitor=janitor.run_once,
        janitor_schedule=settings.janitor_schedule,
    )
    scheduler_box.append(scheduler)
    assert settings.api_token is not None
    app = create_api(
        service, api_token=settings.api_token.get_secret_value(), pipelines=pipelines, janitor=janitor
    )
    return Daemon(
        settings=settings,
        store=store,
        service=service,
        watcher=watcher,
        app=app,
        progress=progress,
        pipelines=pipelines,
        scheduler=scheduler,
    )


def package(settings: Settings, *, with_venv: bool, out: TextIO) -> int:
    """`replayd package`: build the job artifact and upload it under its content hash (EMR)."""
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
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Serve (no subcommand) or run one subcommand; the exit code: 0 done, 2 bad settings, 1 failed."""
    args = _arguments(sys.argv[1:] if argv is None else argv)
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
    log.info("replayd listening", host=settings.daemon_host, port=settings.daemon_port)
    try:
        uvicorn.run(daemon.app, host=settings.daemon_host, port=settings.daemon_port, log_config=None)
    finally:
        daemon.stop()


if __name__ == "__main__":
    sys.exit(main())
