"""`replay`: the Slack grammar on the command line, for when Slack itself is down.

    replay orders 2024-01-01..2024-01-07 tps=10000 --follow
    replay plan orders last=6h
    replay status r-0123456789ab | replay list [mine|running] | replay cancel r-0123456789ab
    replay reconcile r-0123456789ab --follow | replay chart r-0123456789ab -o run.png
    replay schedule orders every=1h watermark=updated_at | replay pipelines [mine] | replay pipeline p-…
    replay pause|resume p-… | replay unschedule p-… --yes
    replay lag <group> [topic] | replay rewind <group> <topic> to=<time>|earliest|latest [--yes]
    replay login [daemon URL] | replay logout     (a personal token, stored 0600 for this user)
    replay help [command] | replay --help | replay --version | replay completion bash  (no settings needed)

Exit codes: 0 success, 1 the run failed (or the service could not be reached; for `reconcile --follow`,
the verdict is not clean), 2 bad input, 130 Ctrl-C (during `--follow` the run goes on and the command
that cancels it is printed). `daemon.cli.usage` holds them, with the text `--help` and the README show.
"""

from __future__ import annotations

import getpass
import json
import os
import shlex
import sys
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC
from functools import partial
from pathlib import Path
from typing import TextIO

from pydantic import BaseModel
from rich.console import Console

from daemon.cli.follow import (
    follow_run,
    stopped_following,
    stopped_waiting_for_reconcile,
    wait_until_terminal,
)
from daemon.cli.groups import run_group_command
from daemon.cli.login import credentials_path, load_login, login, logout
from daemon.cli.self_help import answer_without_settings
from daemon.cli.sources import chosen_sources, describe_sources

# The exit codes, defined with their meanings in `usage`, re-exported for callers and tests.
from daemon.cli.usage import EXIT_BAD_INPUT as EXIT_BAD_INPUT
from daemon.cli.usage import EXIT_FAILED as EXIT_FAILED
from daemon.cli.usage import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from daemon.cli.usage import EXIT_OK as EXIT_OK
from daemon.cli.usage import cli_help, parse_arguments, topic_help, version_text
from daemon.cli.watch import watch_lines
from daemon.config.client_settings import DEFAULT_DAEMON_URL, load_client_settings
from daemon.contract.client import DaemonClient, PipelineAction
from daemon.contract.models import PipelineOut, PlanOut, ReplayBody, RunOut, ScheduleBody
from daemon.core.errors import BadRequest, ConfigError, ReplayError
from daemon.core.grammar import (
    CancelCommand,
    ChartCommand,
    Command,
    HelpCommand,
    LagCommand,
    ListCommand,
    PauseCommand,
    PauseRunCommand,
    PipelineCommand,
    PipelinesCommand,
    PlanCommand,
    ReconcileCommand,
    ReplayCommand,
    ResumeCommand,
    ResumeRunCommand,
    RewindCommand,
    ScheduleCommand,
    SourcesCommand,
    StatusCommand,
    TpsCommand,
    UnscheduleCommand,
    parse,
)
from daemon.core.grammar.limits import CEILINGS
from daemon.core.quantities import render_place
from daemon.core.states import RunKind, RunState

Answer = BaseModel | Sequence[BaseModel]


def describe_pipeline(pipeline: PipelineOut) -> str:
    text = (
        f"{pipeline.id} {pipeline.state}: {pipeline.source} {pipeline.schedule} "
        f"watermark={pipeline.watermark_column} -> {pipeline.topic} at {pipeline.tps}/s"
    )
    text += f", committed {pipeline.watermark or 'nothing yet'}"
    if pipeline.state == "active" and pipeline.next_run_at is not None:
        text += f", next run {pipeline.next_run_at.isoformat()}"
    return text


def describe_run(run: RunOut) -> str:
    text = f"{run.id} {run.state}: {run.source} {run.window} -> {run.topic} at {run.tps}/s"
    if run.paused:
        text += f" (paused; resumes at {run.current_tps}/s)"
    elif run.current_tps != run.tps:
        text += f" (now {run.current_tps}/s)"
    if run.state == RunState.QUEUED and run.queue_position is not None:
        text += f" ({render_place(run.queue_position)}: it starts when a running job ends)"
    if run.rows is not None:
        text += f", {run.confirmed:,}/{run.rows:,} confirmed"
    if run.state == RunState.SUCCEEDED and run.achieved_tps:
        text += f" (achieved {run.achieved_tps:,.1f}/s)"
    if run.dead_lettered:  # None (unknown) is not 0: only a reported count is shown
        where = f" in {run.dlq_topic}" if run.dlq_topic else ""
        text += f", dlq={run.dead_lettered:,} set aside{where}"
    if run.duplicates is None and run.terminal and run.kind != RunKind.RECONCILE:
        text += ", duplicates not measured"
    elif run.duplicates:
        text += f", {run.duplicates:,} possibly duplicated by retried tasks"
    if run.on_topic_at_least:
        text += f", at least {run.on_topic_at_least:,} are on the topic"
    if run.failure_reason:
        text += f" — {run.failure_reason}"
    text += watch_lines(run)
    if run.reconcile is not None:
        text += f"\n  reconcile: {run.reconcile.verdict().text}"
        for name in ("missing", "unexpected", "duplicates"):
            if sample := getattr(run.reconcile, f"{name}_sample"):
                text += f"\n    {name}: {', '.join(sample)}"
    return text


def describe_plan(plan: PlanOut) -> str:
    partitions = f"{plan.partitions} partition{'s' if plan.partitions != 1 else ''}"
    text = (
        f"{plan.rows:,} rows of {plan.source} {plan.window} -> {plan.topic} ({partitions}) "
        f"at {plan.tps:,}/s: about {plan.eta_s:,.0f}s"
    )
    if plan.eta_startup_s is not None and plan.eta_publish_s is not None:
        text += f" (~{plan.eta_startup_s:,.0f}s to start, ~{plan.eta_publish_s:,.0f}s to publish"
        if plan.eta_finish_s is not None and plan.eta_finish_s >= 1:
            text += f", ~{plan.eta_finish_s:,.0f}s to finish"
        text += ")"
    if plan.rewind_instead:
        text += f"\nthe window is still on the live topic: `replay {plan.rewind_instead}` re-delivers it"
    return text


def as_json(answer: Answer) -> str:
    """An answer as the API sent it: `--json` output is the wire contract."""
    if isinstance(answer, BaseModel):
        return json.dumps(answer.model_dump(mode="json"), sort_keys=True)
    return json.dumps([item.model_dump(mode="json") for item in answer], sort_keys=True)


def _ask_on_terminal(prompt: str, err: TextIO | None = None) -> str:
    """A y/N question on stderr (stdout may be `--json`); no answer (end of input) is no."""
    print(prompt, end="", file=err or sys.stderr, flush=True)
    return sys.stdin.readline()


class Cli:
    def __init__(
        self,
        client: DaemonClient,
        actor: str,
        *,
        as_json: bool,
        out: TextIO,
        err: TextIO | None = None,
        output: str | None = None,
        ask: Callable[[str], str] | None = None,
    ) -> None:
        self._err = err or sys.stderr  # what is said about the output, never in it (`--json`)
        self._ask = ask or _ask_on_terminal  # `rewind`'s y/N
        self._output = output  # `-o`: where `chart` writes its PNG
        self._client = client
        self._actor = actor
        self._json = as_json
        self._out = out
        self._console = Console(file=out, highlight=False)

    def _emit(self, answer: Answer, text: str) -> None:
        print(as_json(answer) if self._json else text, file=self._out)

    def run(self, command: Command, *, follow: bool, confirm_live: bool) -> int:
        if isinstance(command, HelpCommand):
            print(topic_help(command.topic), file=self._out)
            return EXIT_OK
        if isinstance(command, PlanCommand):
            plan = self._client.plan(self._actor, ReplayBody.of(command))
            self._emit(plan, describe_plan(plan))
            return EXIT_OK
        if isinstance(command, ReplayCommand):
            created = self._client.create_replay(
                self._actor,
                ReplayBody.of(command, confirm_live=confirm_live),
                idempotency_key=f"cli-{uuid.uuid4().hex}",  # a retry of this call cannot start a second run
            )
            self._emit(created, f"created {describe_run(created)}")
            return self._follow(created) if follow else EXIT_OK
        if isinstance(command, StatusCommand):
            run = self._client.get_replay(self._actor, command.run_id or self._latest_run_id())
            self._emit(run, describe_run(run))
            return self._follow(run) if follow else EXIT_OK
        if isinstance(command, ListCommand):
            page = self._client.list_replays(
                self._actor,
                requester=self._actor if command.filter == "mine" else None,
                state="running" if command.filter == "running" else None,
            )
            self._emit(page, "\n".join(describe_run(r) for r in page.runs) or "no runs")
            return EXIT_OK
        if isinstance(command, CancelCommand):
            run = self._client.cancel_replay(self._actor, command.run_id)
            self._emit(run, f"cancelling {describe_run(run)}")
            return EXIT_OK
        if isinstance(command, TpsCommand | PauseRunCommand | ResumeRunCommand):
            return self._control(command)
        if isinstance(command, ReconcileCommand):
            return self._reconcile(command, follow=follow)
        if isinstance(command, ChartCommand):
            return self._chart(command)
        if isinstance(command, SourcesCommand):
            sources = chosen_sources(self._client.sources(self._actor), command.source)
            self._emit(sources, describe_sources(sources))
            return EXIT_OK
        if isinstance(command, LagCommand | RewindCommand):
            return run_group_command(
                self._client,
                self._actor,
                command,
                emit=self._emit,
                confirmed=confirm_live,
                ask=self._ask,
                out=self._out,
            )
        return self._pipelines(command, confirm=confirm_live)

    def _control(self, command: TpsCommand | PauseRunCommand | ResumeRunCommand) -> int:
        """Live control: the run as it now stands (its rate changes a moment later, on every task)."""
        if isinstance(command, TpsCommand):
            run = self._client.set_tps(self._actor, command.run_id, command.tps)
        elif isinstance(command, PauseRunCommand):
            run = self._client.pause_replay(self._actor, command.run_id)
        else:
            run = self._client.resume_replay(self._actor, command.run_id)
        change = run.rate_changes[-1] if run.rate_changes else None
        when = f" from {change.at.astimezone(UTC):%H:%M:%S} UTC" if change is not None else ""
        self._emit(run, f"{describe_run(run)}{when}")
        return EXIT_OK

    def _reconcile(self, command: ReconcileCommand, *, follow: bool) -> int:
        """Queue a reconcile; with --follow wait for it and print the run with its verdict."""
        job = self._client.reconcile(self._actor, command.run_id)
        if not follow:
            self._emit(
                job, f"reconciling {command.run_id} as {job.id}; `replay status {command.run_id}` shows it"
            )
            return EXIT_OK
        try:
            job = wait_until_terminal(self._client, self._actor, job)
        except KeyboardInterrupt:
            print(stopped_waiting_for_reconcile(job.id, command.run_id), file=self._err)
            return EXIT_INTERRUPTED
        run = self._client.get_replay(self._actor, command.run_id)
        self._emit(run, describe_run(run))
        verdict = run.reconcile.verdict() if run.reconcile is not None else None
        return (
            EXIT_OK
            if job.state == RunState.SUCCEEDED and verdict is not None and verdict.clean
            else EXIT_FAILED
        )

    def _chart(self, command: ChartCommand) -> int:
        if self._output is None:
            raise BadRequest("where should the chart go? add -o <file>.png")
        png = self._client.chart_png(self._actor, command.run_id)
        Path(self._output).write_bytes(png)
        print(
            f"wrote the rate chart of {command.run_id} to {self._output} ({len(png):,} bytes)", file=self._out
        )
        return EXIT_OK

    def _pipelines(self, command: Command, *, confirm: bool) -> int:
        if isinstance(command, ScheduleCommand):
            pipeline = self._client.schedule(
                self._actor,
                ScheduleBody.of(command, confirm_live=confirm),
                idempotency_key=f"cli-{uuid.uuid4().hex}",  # a retry of this call cannot schedule twice
            )
            self._emit(pipeline, f"scheduled {describe_pipeline(pipeline)}")
        elif isinstance(command, PipelinesCommand):
            if command.filter == "idle":
                idle = self._client.idle_pipelines(self._actor)
                lines = [
                    f"{describe_pipeline(p)}; removed after {p.deadline.isoformat()} unless kept"
                    for p in idle
                ]
                self._emit(idle, "\n".join(lines) or "no idle pipelines")
                return EXIT_OK
            owner = self._actor if command.filter == "mine" else None
            found = self._client.list_pipelines(self._actor, owner=owner)
            self._emit(found, "\n".join(describe_pipeline(p) for p in found) or "no pipelines")
        elif isinstance(command, PipelineCommand):
            detail = self._client.get_pipeline(self._actor, command.pipeline_id)
            runs = "\n".join(f"  {describe_run(r)}" for r in detail.runs) or "  no runs yet"
            self._emit(detail, f"{describe_pipeline(detail)}\nlast runs:\n{runs}")
        elif isinstance(command, PauseCommand | ResumeCommand):
            action: PipelineAction = "pause" if isinstance(command, PauseCommand) else "resume"
            pipeline = self._client.pipeline_action(self._actor, command.pipeline_id, action)
            self._emit(pipeline, describe_pipeline(pipeline))
        elif isinstance(command, UnscheduleCommand):
            if not confirm:
                raise BadRequest(
                    f"unscheduling {command.pipeline_id} stops it for good: add --yes to confirm"
                )
            pipeline = self._client.unschedule(self._actor, command.pipeline_id, confirm=True)
            self._emit(pipeline, describe_pipeline(pipeline))
        else:
            raise BadRequest(f"'{type(command).__name__}' is not available from this command line")
        return EXIT_OK

    def _latest_run_id(self) -> str:
        runs = self._client.list_replays(self._actor, requester=self._actor, limit=1).runs
        if not runs:
            raise BadRequest("you have no runs yet")
        return runs[0].id

    def _follow(self, run: RunOut) -> int:
        """Until the run ends; Ctrl-C leaves it running and prints how to cancel it."""
        try:
            run = follow_run(self._client, self._actor, run, console=self._console, show_bar=not self._json)
        except KeyboardInterrupt:
            print(stopped_following(run.id), file=self._err)
            return EXIT_INTERRUPTED
        self._emit(run, describe_run(run))
        return EXIT_OK if run.state == RunState.SUCCEEDED else EXIT_FAILED


def _login_command(words: Sequence[str], out: TextIO) -> int:
    """`replay login [daemon URL]` asks for the token without echoing it; `replay logout` forgets it."""
    path = credentials_path(os.environ)
    if words[0] == "logout":
        print(f"logged out: {path} removed" if logout(path) else "not logged in", file=out)
        return EXIT_OK
    url = words[1] if len(words) > 1 else load_client_settings().daemon_url or DEFAULT_DAEMON_URL
    stored = login(url, path, lambda: getpass.getpass("personal token (input hidden): "))
    print(f"logged in as {stored.user} at {stored.daemon_url}; token stored in {path} (mode 0600)", file=out)
    return EXIT_OK


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    args = parse_arguments(sys.argv[1:] if argv is None else argv)
    if args.help or args.version:
        print(cli_help() if args.help else version_text(), file=out)
        return EXIT_OK
    try:
        if (answered := answer_without_settings(args.words, out)) is not None:
            return answered
        if args.words[:1] in (["login"], ["logout"]):
            return _login_command(args.words, out)
        settings = load_client_settings()
        command = parse(shlex.join(args.words), CEILINGS)  # the daemon refuses what is over its own limits
        stored = load_login(credentials_path(os.environ))
        actor = args.actor or settings.user or (stored.user if stored else None)
        if not actor:
            raise ConfigError(
                "REPLAY_USER is required (or --as <Slack user id>, or `replay login`): who is asking"
            )
        if settings.api_token is not None:
            base_url = settings.daemon_url or DEFAULT_DAEMON_URL
            token = settings.api_token.get_secret_value()
        elif stored is not None:
            base_url, token = settings.daemon_url or stored.daemon_url, stored.token
        else:
            raise ConfigError("not logged in: run `replay login` with the personal token an admin gave you")
        with DaemonClient(base_url=base_url, token=token) as client:
            ask = partial(_ask_on_terminal, err=err)  # the prompt goes where errors go
            code = Cli(client, actor, as_json=args.json, out=out, err=err, output=args.output, ask=ask).run(
                command, follow=args.follow, confirm_live=args.confirm
            )
    except (BadRequest, ConfigError) as exc:
        print(f"replay: {exc}", file=err)
        return EXIT_BAD_INPUT
    except ReplayError as exc:
        print(f"replay: {exc}", file=err)
        return EXIT_FAILED
    except KeyboardInterrupt:  # before a run was known: whatever the service accepted goes on
        print("replay: interrupted; `replay list mine` shows the runs that were started", file=err)
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    raise SystemExit(main())
