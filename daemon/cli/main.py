"""`replay`: the Slack grammar on the command line, for when Slack itself is down.

    replay orders 2024-01-01..2024-01-07 tps=10000 --follow
    replay plan orders last=6h
    replay status r-0123456789ab | replay list [mine|running] | replay cancel r-0123456789ab
    replay schedule orders every=1h watermark=updated_at | replay pipelines [mine] | replay pipeline p-…
    replay pause|resume p-… | replay unschedule p-… --yes
    replay package [--with-venv]      (EMR: build and upload the job artifact)

Exit codes: 0 success, 1 the run failed (or the service could not be reached), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import boto3
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from daemon.adapters.packaging import package_and_upload
from daemon.config.settings import Settings, load_settings
from daemon.contract.client import DaemonClient
from daemon.core.errors import BadRequest, ConfigError, ReplayError
from daemon.core.grammar import (
    CancelCommand,
    Command,
    HelpCommand,
    ListCommand,
    PauseCommand,
    PipelineCommand,
    PipelinesCommand,
    PlanCommand,
    ReplayCommand,
    ResumeCommand,
    ScheduleCommand,
    StatusCommand,
    UnscheduleCommand,
    help_text,
    parse,
)
from daemon.core.quantities import render_duration
from daemon.core.windows import label

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
TERMINAL = ("succeeded", "failed", "cancelled", "skipped")


def request_body(command: ReplayCommand | PlanCommand) -> dict[str, Any]:
    """The API request for a parsed replay or plan command."""
    body: dict[str, Any] = {
        "source": command.source,
        "window": label(command.window),
        "topic": command.topic,
        "ordering": command.ordering,
        "headers": dict(command.headers),
    }
    if command.tps is not None:
        body["tps"] = command.tps
    if command.workers is not None:
        body["workers"] = command.workers
    return body


def schedule_body(command: ScheduleCommand) -> dict[str, Any]:
    """The API request for a parsed `schedule` command."""
    body: dict[str, Any] = {
        "source": command.source,
        "watermark": command.watermark,
        "topic": command.topic,
        "headers": dict(command.headers),
    }
    if command.every_seconds is not None:
        body["every"] = render_duration(command.every_seconds)
    if command.cron is not None:
        body["cron"] = command.cron
    if command.tps is not None:
        body["tps"] = command.tps
    if command.lookback_seconds:
        body["lookback"] = render_duration(command.lookback_seconds)
    if command.idle_after_days is not None:
        body["idle_after_days"] = command.idle_after_days
    return body


def describe_pipeline(pipeline: dict[str, Any]) -> str:
    text = (
        f"{pipeline['id']} {pipeline['state']}: {pipeline['source']} {pipeline['schedule']} "
        f"watermark={pipeline['watermark_column']} -> {pipeline['topic']} at {pipeline['tps']}/s"
    )
    text += f", committed {pipeline['watermark'] or 'nothing yet'}"
    if pipeline["state"] == "active" and pipeline.get("next_run_at"):
        text += f", next run {pipeline['next_run_at']}"
    return text


def describe_run(run: dict[str, Any]) -> str:
    text = f"{run['id']} {run['state']}: {run['source']} {run['window']} -> {run['topic']} at {run['tps']}/s"
    if run.get("rows") is not None:
        text += f", {run['confirmed']:,}/{run['rows']:,} confirmed"
    if run["state"] == "succeeded" and run.get("achieved_tps"):
        text += f" (achieved {run['achieved_tps']:,.1f}/s)"
    if run.get("duplicates"):
        text += f", {run['duplicates']:,} possibly duplicated by retried tasks"
    if run.get("failure_reason"):
        text += f" — {run['failure_reason']}"
    return text


class Cli:
    def __init__(self, client: DaemonClient, actor: str, *, as_json: bool, out: TextIO) -> None:
        self._client = client
        self._actor = actor
        self._json = as_json
        self._out = out
        self._console = Console(file=out, highlight=False)

    def _emit(self, data: Any, text: str) -> None:
        print(json.dumps(data, sort_keys=True) if self._json else text, file=self._out)

    def run(self, command: Command, *, follow: bool, confirm_live: bool) -> int:
        if isinstance(command, HelpCommand):
            print(help_text(), file=self._out)
            return EXIT_OK
        if isinstance(command, PlanCommand):
            plan = self._client.plan(self._actor, request_body(command))
            self._emit(
                plan,
                f"{plan['rows']:,} rows of {plan['source']} {plan['window']} -> {plan['topic']} "
                f"({plan['partitions']} partition{'s' if plan['partitions'] != 1 else ''}) "
                f"at {plan['tps']:,}/s: about {plan['eta_s']:,.0f}s",
            )
            return EXIT_OK
        if isinstance(command, ReplayCommand):
            body = {**request_body(command), "confirm_live": confirm_live}
            run = self._client.create_replay(self._actor, body)
            self._emit(run, f"created {describe_run(run)}")
            return self._follow(run) if follow else EXIT_OK
        if isinstance(command, StatusCommand):
            run_id = command.run_id or self._latest_run_id()
            run = self._client.get_replay(self._actor, run_id)
            self._emit(run, describe_run(run))
            return self._follow(run) if follow else EXIT_OK
        if isinstance(command, ListCommand):
            page = self._client.list_replays(
                self._actor,
                requester=self._actor if command.filter == "mine" else None,
                state="running" if command.filter == "running" else None,
            )
            self._emit(page, "\n".join(describe_run(r) for r in page["runs"]) or "no runs")
            return EXIT_OK
        if isinstance(command, CancelCommand):
            run = self._client.cancel_replay(self._actor, command.run_id)
            self._emit(run, f"cancelling {describe_run(run)}")
            return EXIT_OK
        return self._pipelines(command, confirm=confirm_live)

    def _pipelines(self, command: Command, *, confirm: bool) -> int:
        if isinstance(command, ScheduleCommand):
            pipeline = self._client.schedule(self._actor, {**schedule_body(command), "confirm_live": confirm})
            self._emit(pipeline, f"scheduled {describe_pipeline(pipeline)}")
        elif isinstance(command, PipelinesCommand):
            if command.filter == "idle":
                idle = self._client.idle_pipelines(self._actor)
                lines = [f"{describe_pipeline(p)}; removed after {p['deadline']} unless kept" for p in idle]
                self._emit(idle, "\n".join(lines) or "no idle pipelines")
                return EXIT_OK
            owner = self._actor if command.filter == "mine" else None
            found = self._client.list_pipelines(self._actor, owner=owner)
            self._emit(found, "\n".join(describe_pipeline(p) for p in found) or "no pipelines")
        elif isinstance(command, PipelineCommand):
            detail = self._client.get_pipeline(self._actor, command.pipeline_id)
            runs = "\n".join(f"  {describe_run(r)}" for r in detail["runs"]) or "  no runs yet"
            self._emit(detail, f"{describe_pipeline(detail)}\nlast runs:\n{runs}")
        elif isinstance(command, PauseCommand | ResumeCommand):
            action = "pause" if isinstance(command, PauseCommand) else "resume"
            pipeline = self._client.pipeline_action(self._actor, command.pipeline_id, action)
            self._emit(pipeline, describe_pipeline(pipeline))
        elif isinstance(command, UnscheduleCommand):
            if not confirm:
                raise BadRequest(
                    f"unscheduling {command.pipeline_id} stops it for good: add --yes to confirm"
                )
            body = {"confirm": True}
            pipeline = self._client.pipeline_action(self._actor, command.pipeline_id, "unschedule", body)
            self._emit(pipeline, describe_pipeline(pipeline))
        else:
            raise BadRequest(f"'{type(command).__name__}' is not available from this command line")
        return EXIT_OK

    def _latest_run_id(self) -> str:
        runs = self._client.list_replays(self._actor, requester=self._actor, limit=1)["runs"]
        if not runs:
            raise BadRequest("you have no runs yet")
        return runs[0]["id"]

    def _follow(self, run: dict[str, Any], poll_s: float = 1.0) -> int:
        total = run.get("rows") or None
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.completed:,.0f} confirmed"),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=self._console, disable=self._json) as bar:
            task = bar.add_task(run["id"], total=total, completed=run["confirmed"])
            while run["state"] not in TERMINAL:
                time.sleep(poll_s)
                run = self._client.get_replay(self._actor, run["id"])
                bar.update(task, completed=run["confirmed"], description=f"{run['id']} {run['state']}")
        self._emit(run, describe_run(run))
        return EXIT_OK if run["state"] == "succeeded" else EXIT_FAILED


def package(settings: Settings, *, with_venv: bool, out: TextIO) -> int:
    """`replay package`: build the job artifact and upload it under its content hash (EMR)."""
    settings.emr.require_launch()
    s3 = boto3.client("s3", **settings.emr.client_kwargs())
    uris = package_and_upload(settings.emr, s3, with_venv=with_venv)
    print(json.dumps(uris, indent=2, sort_keys=True), file=out)
    return EXIT_OK


def _arguments(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="replay",
        description="Replay lake tables into Kafka.",
        epilog=help_text(),
        add_help=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--follow", action="store_true", help="show progress until the run ends")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--confirm-live",
        "--yes",
        dest="confirm",
        action="store_true",
        help="allow publishing into a live topic; confirm an unschedule",
    )
    parser.add_argument("--as", dest="actor", help="Slack user id to act as (default: REPLAY_USER)")
    parser.add_argument("--with-venv", action="store_true", help="package: also build the job's virtualenv")
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("words", nargs="*")
    return parser.parse_intermixed_args(argv)


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    args = _arguments(sys.argv[1:] if argv is None else argv)
    if args.help:
        print(help_text(), file=out)
        return EXIT_OK
    try:
        if args.words[:1] == ["package"]:
            return package(load_settings(), with_venv=args.with_venv, out=out)
        command = parse(shlex.join(args.words))
        settings = load_settings()
        actor = args.actor or settings.user
        if not actor:
            raise ConfigError("REPLAY_USER is required (or --as <Slack user id>): who is asking")
        settings.require("api_token")
        assert settings.api_token is not None
        with DaemonClient(
            base_url=settings.daemon_url, token=settings.api_token.get_secret_value()
        ) as client:
            code = Cli(client, actor, as_json=args.json, out=out).run(
                command, follow=args.follow, confirm_live=args.confirm
            )
    except (BadRequest, ConfigError) as exc:
        print(f"replay: {exc}", file=err)
        return EXIT_BAD_INPUT
    except ReplayError as exc:
        print(f"replay: {exc}", file=err)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_FAILED
    return code


if __name__ == "__main__":
    raise SystemExit(main())
