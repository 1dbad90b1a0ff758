"""`replay`: the Slack grammar on the command line, for when Slack itself is down.

    replay orders 2024-01-01..2024-01-07 tps=10000 --follow
    replay plan orders last=6h
    replay status r-0123456789ab | replay list [mine|running] | replay cancel r-0123456789ab
    replay reconcile r-0123456789ab --follow | replay chart r-0123456789ab -o run.png
    replay schedule orders every=1h watermark=updated_at | replay schedule … incremental=snapshot
    replay pipelines [mine] | replay pipeline p-…
    replay pause|resume p-… | replay unschedule p-… --yes
    replay lag <group> [topic] | replay rewind <group> <topic> to=<time>|earliest|latest [--yes]
    replay login [daemon URL] | replay logout     (a personal token, stored 0600 for this user)
    replay help [command] | replay --help | replay --version | replay completion bash  (no settings needed)

Exit codes: 0 success, 1 the run failed (or the service could not be reached; for `reconcile --follow`,
the verdict is not clean), 2 bad input, 130 Ctrl-C (during `--follow` the run goes on and the command
that cancels it is printed). `daemon.cli.usage` holds them, with the text `--help` and docs/usage.md show.
"""

from __future__ import annotations

import getpass
import json
import os
import shlex
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel
from rich.console import Console

from daemon.cli.drains import drain_lines
from daemon.cli.follow import (
    follow_run,
    stopped_following,
    stopped_waiting_for_reconcile,
    wait_until_terminal,
)
from daemon.cli.groups import describe_lag, describe_rewind
from daemon.cli.login import check_destination, credentials_path, load_login, login, logout
from daemon.cli.self_help import answer_without_settings
from daemon.cli.sources import chosen_sources, describe_sources

# The exit codes, defined with their meanings in `usage`, re-exported for callers and tests.
from daemon.cli.usage import EXIT_BAD_INPUT as EXIT_BAD_INPUT
from daemon.cli.usage import EXIT_FAILED as EXIT_FAILED
from daemon.cli.usage import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from daemon.cli.usage import EXIT_OK as EXIT_OK
from daemon.cli.usage import cli_help, parse_arguments, topic_help, version_text
from daemon.config.client_settings import DEFAULT_DAEMON_URL, load_client_settings
from daemon.contract.client import DaemonClient
from daemon.contract.commands import (
    Asker,
    Cancelling,
    ChartDrawn,
    HelpShown,
    IdlePipelinesListed,
    LagMeasured,
    LiveReplayToConfirm,
    LiveResumeToApprove,
    LiveScheduleToConfirm,
    PageOpened,
    PipelineChanged,
    PipelineShown,
    PipelinesListed,
    Planned,
    RateChanged,
    ReconcileQueued,
    ReplayCreated,
    Result,
    RewindToConfirm,
    Rewound,
    RunShown,
    RunsListed,
    Scheduled,
    SourcesShown,
    Unscheduled,
    UnscheduleToConfirm,
    execute,
)
from daemon.contract.models import PipelineOut, PlanOut, RunOut
from daemon.core.errors import BadRequest, ConfigError, GroupHasMembers, ReplayError
from daemon.core.grammar import ChartCommand, Command, parse
from daemon.core.grammar.limits import CEILINGS
from daemon.core.quantities import render_place
from daemon.core.rate_shape import rate_label, shape_label, shape_note
from daemon.core.states import RunKind, RunState

Answer = BaseModel | Sequence[BaseModel]


def _follows(pipeline: PipelineOut) -> str:
    if pipeline.watermark_column is None:
        return "incremental=snapshot"
    return f"watermark={pipeline.watermark_column}"


def describe_pipeline(pipeline: PipelineOut) -> str:
    text = (
        f"{pipeline.id} {pipeline.state}: {pipeline.source} {pipeline.schedule} "
        f"{_follows(pipeline)} -> {pipeline.topic} at {pipeline.tps}/s"
    )
    text += f", committed {pipeline.watermark or 'nothing yet'}"
    if pipeline.state == "active" and pipeline.next_run_at is not None:
        text += f", next run {pipeline.next_run_at.isoformat()}"
    if pipeline.deprovision_reason is not None:
        text += f", being removed ({pipeline.deprovision_reason})"
    return text


def describe_run(run: RunOut) -> str:
    source = run.source if run.snapshot is None else f"{run.source}@{run.snapshot}"
    text = f"{run.id} {run.state}: {source} {run.window} -> {run.topic} at {run.tps}/s"
    if run.speed is not None:
        text += f" (the original timeline at {run.speed:g}x)"
    elif shape := shape_label(run.tps, run.ramp_s, run.max_mb):
        text += f" ({shape})"
    if run.where is not None:
        text += f", where {run.where}"
    if run.fields:
        text += f", fields {','.join(run.fields)}"
    if run.paused:
        text += f" (paused; resumes at {run.current_tps}/s)"
    elif run.current_tps != run.tps:
        text += f" (now {run.current_tps}/s)"
    if run.state == RunState.QUEUED and run.queue_position is not None:
        text += f" ({render_place(run.queue_position)}: it starts when a running job ends)"
    if run.confirmed is None:  # the job could not count them: unknown, never 0
        at_least = f" (at least {run.on_topic_at_least:,} on the topic)" if run.on_topic_at_least else ""
        text += f", confirmed unknown{at_least}"
    elif run.rows is not None:
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
    text += drain_lines(run)
    if run.reconcile is not None:
        text += f"\n  reconcile: {run.reconcile.verdict().text}"
        for name in ("missing", "unexpected", "duplicates"):
            if sample := getattr(run.reconcile, f"{name}_sample"):
                text += f"\n    {name}: {', '.join(sample)}"
    return text


def describe_plan(plan: PlanOut) -> str:
    partitions = f"{plan.partitions} partition{'s' if plan.partitions != 1 else ''}"
    kept = "" if plan.where is None else f" where {plan.where}"
    if plan.keys_file is not None:
        kept += f", the {plan.keys_count:,} keys in {plan.keys_file}"
    if plan.erasures is not None:
        kept += f", less the events of {plan.erased_keys:,} erased keys"
    text = (
        f"{plan.rows:,} rows of {plan.source} {plan.window}{kept} -> {plan.topic} ({partitions}) "
        f"at {rate_label(plan.tps, plan.ramp_s, plan.max_mb, plan.speed)}: about {plan.eta_s:,.0f}s"
    )
    if plan.eta_startup_s is not None and plan.eta_publish_s is not None:
        text += " ("
        if plan.eta_queue_s >= 1:
            ahead = f"{plan.runs_ahead} run{'s' if plan.runs_ahead != 1 else ''}"
            text += f"~{plan.eta_queue_s:,.0f}s waiting for {ahead} ahead, "
        warmth = "" if plan.warm is None else " (warm)" if plan.warm else " (cold)"
        text += f"~{plan.eta_startup_s:,.0f}s to start{warmth}, ~{plan.eta_publish_s:,.0f}s to publish"
        if plan.eta_finish_s is not None and plan.eta_finish_s >= 1:
            text += f", ~{plan.eta_finish_s:,.0f}s to finish"
        text += ")"
    if plan.speed is not None:
        text += f"\n{shape_note(plan.speed, plan.tps, plan.peak_tps, plan.slid_s)}"
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
        """The command's one call (the shared table), rendered as text or `--json`; the exit code."""
        if isinstance(command, ChartCommand) and self._output is None:
            raise BadRequest("where should the chart go? add -o <file>.png")
        key = f"cli-{uuid.uuid4().hex}"  # a retry of this call cannot start, schedule or rewind twice
        asker = Asker(actor=self._actor, key=key, confirmed=confirm_live)
        result = execute(self._client, command, asker)
        if isinstance(result, RewindToConfirm):
            if not self._rewind_confirmed(result):
                return EXIT_FAILED
            result = execute(self._client, command, replace(asker, confirmed=True))
        if isinstance(result, ReconcileQueued):
            return self._reconciled(result, follow=follow)
        self._render(result)
        if follow and isinstance(result, ReplayCreated | RunShown):
            return self._follow(result.run)
        return EXIT_OK

    def _render(self, result: Result) -> None:
        """Print one result (a confirmation the command line cannot give is refused as bad input)."""
        RENDERERS[type(result)](self, result)

    def emit(self, answer: Answer, text: str) -> None:
        self._emit(answer, text)

    def say(self, text: str) -> None:
        print(text, file=self._out)

    def write_chart(self, drawn: ChartDrawn) -> None:
        assert self._output is not None  # checked before the call
        Path(self._output).write_bytes(drawn.png)
        self.say(f"wrote the rate chart of {drawn.run_id} to {self._output} ({len(drawn.png):,} bytes)")

    def _rewind_confirmed(self, result: RewindToConfirm) -> bool:
        """The preview, then `Rewind? [y/N]` (a group with members is refused before the question)."""
        self._render(result)
        if result.preview.blocked:
            raise GroupHasMembers(result.command.group, result.preview.blocked)
        if self._ask("Rewind? [y/N] ").strip().lower() in ("y", "yes"):
            return True
        print("not rewound: nothing moved", file=self._out)
        return False

    def _reconciled(self, queued: ReconcileQueued, *, follow: bool) -> int:
        """A queued reconcile; with --follow wait for it and print the run with its verdict."""
        job, run_id = queued.job, queued.run_id
        if not follow:
            self._render(queued)
            return EXIT_OK
        try:
            job = wait_until_terminal(self._client, self._actor, job)
        except KeyboardInterrupt:
            print(stopped_waiting_for_reconcile(job.id, run_id), file=self._err)
            return EXIT_INTERRUPTED
        run = self._client.get_replay(self._actor, run_id)
        self._emit(run, describe_run(run))
        verdict = run.reconcile.verdict() if run.reconcile is not None else None
        return (
            EXIT_OK
            if job.state == RunState.SUCCEEDED and verdict is not None and verdict.clean
            else EXIT_FAILED
        )

    def _follow(self, run: RunOut) -> int:
        """Until the run ends; Ctrl-C leaves it running and prints how to cancel it."""
        try:
            run = follow_run(self._client, self._actor, run, console=self._console, show_bar=not self._json)
        except KeyboardInterrupt:
            print(stopped_following(run.id), file=self._err)
            return EXIT_INTERRUPTED
        self._emit(run, describe_run(run))
        return EXIT_OK if run.state == RunState.SUCCEEDED else EXIT_FAILED


def _rate_changed(cli: Cli, result: RateChanged) -> None:
    run = result.run
    change = run.rate_changes[-1] if run.rate_changes else None
    when = f" from {change.at.astimezone(UTC):%H:%M:%S} UTC" if change is not None else ""
    cli.emit(run, f"{describe_run(run)}{when}")


def _idle(cli: Cli, result: IdlePipelinesListed) -> None:
    idle = result.pipelines
    lines = [f"{describe_pipeline(p)}; removed after {p.deadline.isoformat()} unless kept" for p in idle]
    cli.emit(idle, "\n".join(lines) or "no idle pipelines")


def _pipeline_detail(cli: Cli, result: PipelineShown) -> None:
    detail = result.detail
    runs = "\n".join(f"  {describe_run(r)}" for r in detail.runs) or "  no runs yet"
    cli.emit(detail, f"{describe_pipeline(detail)}\nlast runs:\n{runs}")


def _sources(cli: Cli, result: SourcesShown) -> None:
    sources = chosen_sources(result.sources, result.name)
    cli.emit(sources, describe_sources(sources))


def _refuse(why: str) -> Callable[[Cli, Any], None]:
    """A confirmation the command line gives only with --yes: refused, naming the flag."""

    def refuse(_cli: Cli, result: Any) -> None:
        raise BadRequest(why.format(result=result))

    return refuse


def _unschedule_unconfirmed(_cli: Cli, result: UnscheduleToConfirm) -> None:
    if result.pipeline.state == "archived":
        raise BadRequest(f"{result.command.pipeline_id} is already unscheduled")
    raise BadRequest(f"unscheduling {result.command.pipeline_id} stops it for good: add --yes to confirm")


def _rewind_preview(cli: Cli, result: RewindToConfirm) -> None:
    """The preview; `Cli.run` then asks `Rewind? [y/N]` (or takes --yes) and applies it."""
    cli.emit(result.preview, describe_rewind(result.preview))


# One renderer per result of the shared command table (`tests/contract` checks none is missing).
RENDERERS: dict[type[Any], Callable[[Cli, Any], None]] = {
    HelpShown: lambda cli, r: cli.say(topic_help(r.topic)),
    Planned: lambda cli, r: cli.emit(r.plan, describe_plan(r.plan)),
    ReplayCreated: lambda cli, r: cli.emit(r.run, f"created {describe_run(r.run)}"),
    RunShown: lambda cli, r: cli.emit(r.run, describe_run(r.run)),
    RunsListed: lambda cli, r: cli.emit(r.page, "\n".join(describe_run(x) for x in r.page.runs) or "no runs"),
    Cancelling: lambda cli, r: cli.emit(r.run, f"cancelling {describe_run(r.run)}"),
    RateChanged: _rate_changed,
    ReconcileQueued: lambda cli, r: cli.emit(
        r.job, f"reconciling {r.run_id} as {r.job.id}; `replay status {r.run_id}` shows it"
    ),
    ChartDrawn: lambda cli, r: cli.write_chart(r),
    PageOpened: lambda cli, r: cli.emit(
        r.link,
        f"{r.link.url}\nopen it in your browser before {r.link.expires_at.astimezone(UTC):%H:%M:%S} UTC: "
        "it signs you in to the pages",
    ),
    SourcesShown: _sources,
    Scheduled: lambda cli, r: cli.emit(r.pipeline, f"scheduled {describe_pipeline(r.pipeline)}"),
    PipelinesListed: lambda cli, r: cli.emit(
        r.pipelines, "\n".join(describe_pipeline(p) for p in r.pipelines) or "no pipelines"
    ),
    IdlePipelinesListed: _idle,
    PipelineShown: _pipeline_detail,
    PipelineChanged: lambda cli, r: cli.emit(r.pipeline, describe_pipeline(r.pipeline)),
    Unscheduled: lambda cli, r: cli.emit(r.pipeline, describe_pipeline(r.pipeline)),
    LagMeasured: lambda cli, r: cli.emit(r.lag, describe_lag(r.lag)),
    Rewound: lambda cli, r: cli.emit(r.rewind, describe_rewind(r.rewind)),
    LiveReplayToConfirm: _refuse(
        "publishing into the live topic '{result.plan.topic}' needs a confirmation: add --yes"
    ),
    LiveScheduleToConfirm: _refuse(
        "scheduling into the live topic '{result.live_topic}' needs a confirmation: add --yes"
    ),
    LiveResumeToApprove: _refuse(
        "resuming pipeline {result.command.pipeline_id} into the live topic '{result.live_topic}' needs a "
        "second owner's approval: run `/replay resume {result.command.pipeline_id}` in Slack"
    ),
    UnscheduleToConfirm: _unschedule_unconfirmed,
    RewindToConfirm: _rewind_preview,
}


def _login_command(words: Sequence[str], out: TextIO) -> int:
    """`replay login [daemon URL]` asks for the token without echoing it; `replay logout` forgets it."""
    path = credentials_path(os.environ)
    if words[0] == "logout":
        print(f"logged out: {path} removed" if logout(path) else "not logged in", file=out)
        return EXIT_OK
    settings = load_client_settings()
    url = words[1] if len(words) > 1 else settings.daemon_url or DEFAULT_DAEMON_URL
    stored = login(
        url,
        path,
        lambda: getpass.getpass("personal token (input hidden): "),
        allow_plain_http=settings.allow_plain_http,
    )
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
            check_destination(base_url, allow_plain_http=settings.allow_plain_http)
        elif stored is not None:
            base_url, token = settings.daemon_url or stored.daemon_url, stored.token
            check_destination(base_url, allow_plain_http=settings.allow_plain_http, stored=stored)
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
