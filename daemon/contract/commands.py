"""The command table: each parsed command is one call on the typed client and one typed result.

The Slack app and the CLI share it, so a command means the same thing in both and a new command is one
entry here plus one renderer on each side (the parity test in ``tests/contract`` fails on a command
without an entry, or a result without a renderer). The front ends only render what comes back.

Asking first is part of the table: a replay or a schedule into the live topic, an unschedule and a
rewind answer a ``NeedsConfirmation`` result unless the asker already said yes (the CLI's ``--yes``, a
Slack confirmation click); the front end asks its own way (buttons, ``[y/N]``, a refusal naming
``--yes``) and runs the same command again, confirmed.

    result = execute(client, parse(text, CEILINGS), Asker(actor="U1", key="cli-…"))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

from daemon.contract.client import DaemonClient, PipelineAction
from daemon.contract.groups import LagOut, RewindBody, RewindOut
from daemon.contract.models import (
    IdlePipelineOut,
    PageLinkOut,
    PipelineDetailOut,
    PipelineOut,
    PlanOut,
    RepairBody,
    ReplayBody,
    RunCreated,
    RunOut,
    RunPageOut,
    ScheduleBody,
    SourceOut,
)
from daemon.core.errors import BadRequest, OverlappingReplay, UnknownSource
from daemon.core.grammar import (
    CancelCommand,
    ChartCommand,
    Command,
    HelpCommand,
    LagCommand,
    ListCommand,
    OpenCommand,
    PauseCommand,
    PauseRunCommand,
    PipelineCommand,
    PipelinesCommand,
    PlanCommand,
    ReconcileCommand,
    RedriveCommand,
    RepairCommand,
    ReplayCommand,
    ResumeCommand,
    ResumeRunCommand,
    RewindCommand,
    ScheduleCommand,
    SourcesCommand,
    StatusCommand,
    TpsCommand,
    UnscheduleCommand,
)


@dataclass(frozen=True)
class Asker:
    """Who runs a command, and what only the front end knows about this invocation."""

    actor: str
    key: str  # the Idempotency-Key of a creating call: one per invocation (a Slack trigger, a CLI run)
    channel: str | None = None  # where the run's or pipeline's thread goes (Slack only)
    confirmed: bool = False  # the asker already said yes (the CLI's --yes, a Slack confirmation click)


# --- results --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HelpShown:
    topic: str | None


@dataclass(frozen=True)
class Planned:
    plan: PlanOut


@dataclass(frozen=True)
class ReplayCreated:
    run: RunCreated


@dataclass(frozen=True)
class RunShown:
    run: RunOut


@dataclass(frozen=True)
class RunsListed:
    page: RunPageOut
    filter: Literal["all", "mine", "running"]


@dataclass(frozen=True)
class Cancelling:
    run: RunOut


@dataclass(frozen=True)
class RateChanged:
    run: RunOut


@dataclass(frozen=True)
class ReconcileQueued:
    run_id: str
    job: RunOut


@dataclass(frozen=True)
class ChartDrawn:
    run_id: str
    png: bytes  # a run with no rate series yet is refused (NotFound) with the daemon's reason


@dataclass(frozen=True)
class PageOpened:
    link: PageLinkOut
    run_id: str | None  # its page; None: the console


@dataclass(frozen=True)
class SourcesShown:
    sources: list[SourceOut]
    name: str | None  # one source asked for by name; None: all of them


@dataclass(frozen=True)
class Scheduled:
    pipeline: PipelineOut
    created: bool  # False: an earlier call with the same key made it


@dataclass(frozen=True)
class PipelinesListed:
    pipelines: list[PipelineOut]
    filter: Literal["all", "mine"]


@dataclass(frozen=True)
class IdlePipelinesListed:
    pipelines: list[IdlePipelineOut]


@dataclass(frozen=True)
class PipelineShown:
    detail: PipelineDetailOut


@dataclass(frozen=True)
class PipelineChanged:
    pipeline: PipelineOut
    action: PipelineAction


@dataclass(frozen=True)
class Unscheduled:
    pipeline: PipelineOut


@dataclass(frozen=True)
class LagMeasured:
    lag: LagOut


@dataclass(frozen=True)
class Rewound:
    rewind: RewindOut


class NeedsConfirmation:
    """Nothing was changed: the asker must say yes first (and run the same command, confirmed)."""


@dataclass(frozen=True)
class LiveReplayToConfirm(NeedsConfirmation):
    command: ReplayCommand
    plan: PlanOut  # what would be published, where (the live topic), and how many approvals it needs


@dataclass(frozen=True)
class LiveScheduleToConfirm(NeedsConfirmation):
    command: ScheduleCommand
    live_topic: str
    live_approvals: int = 1  # 2: a second owner approves in the channel before it is created


@dataclass(frozen=True)
class LiveResumeToApprove(NeedsConfirmation):
    """Resuming a live pipeline of a two-owner source: a second owner approves it first."""

    command: ResumeCommand
    pipeline: PipelineDetailOut
    live_topic: str


@dataclass(frozen=True)
class UnscheduleToConfirm(NeedsConfirmation):
    command: UnscheduleCommand
    pipeline: PipelineDetailOut  # its state may already be `archived`: then there is nothing to confirm


@dataclass(frozen=True)
class RewindToConfirm(NeedsConfirmation):
    command: RewindCommand
    preview: RewindOut  # `blocked` says why it cannot be applied now (a group with members)


Result: TypeAlias = (
    HelpShown
    | Planned
    | ReplayCreated
    | RunShown
    | RunsListed
    | Cancelling
    | RateChanged
    | ReconcileQueued
    | ChartDrawn
    | PageOpened
    | SourcesShown
    | Scheduled
    | PipelinesListed
    | IdlePipelinesListed
    | PipelineShown
    | PipelineChanged
    | Unscheduled
    | LagMeasured
    | Rewound
    | LiveReplayToConfirm
    | LiveScheduleToConfirm
    | LiveResumeToApprove
    | UnscheduleToConfirm
    | RewindToConfirm
)
RESULTS: tuple[type[Any], ...] = get_args(Result)


# --- the table ------------------------------------------------------------------------------------------


def _help(_client: DaemonClient, command: HelpCommand, _asker: Asker) -> Result:
    return HelpShown(command.topic)


def _plan(client: DaemonClient, command: PlanCommand, asker: Asker) -> Result:
    return Planned(client.plan(asker.actor, ReplayBody.of(command)))


def refuse_overlap(plan: PlanOut, command: ReplayCommand) -> None:
    """The daemon's own refusal, said before asking: the window repeats a going or recent live run."""
    if plan.overlapping and not command.force:
        other = plan.overlapping[0]
        raise OverlappingReplay(
            run_id=other.run_id,
            requester=other.requester,
            state=other.state,
            window=other.window,
            topic=plan.topic,
        )


def _replay(client: DaemonClient, command: ReplayCommand, asker: Asker) -> Result:
    if command.topic == "live" and not asker.confirmed:
        plan = client.plan(asker.actor, ReplayBody.of(command))
        refuse_overlap(plan, command)
        return LiveReplayToConfirm(command, plan)
    body = ReplayBody.of(command, confirm_live=asker.confirmed, slack_channel=asker.channel)
    return ReplayCreated(client.create_replay(asker.actor, body, idempotency_key=asker.key))


def _status(client: DaemonClient, command: StatusCommand, asker: Asker) -> Result:
    run_id = command.run_id
    if run_id is None:  # the asker's latest run
        runs = client.list_replays(asker.actor, requester=asker.actor, limit=1).runs
        if not runs:
            raise BadRequest("you have no runs yet")
        run_id = runs[0].id
    return RunShown(client.get_replay(asker.actor, run_id))


def _list(client: DaemonClient, command: ListCommand, asker: Asker) -> Result:
    page = client.list_replays(
        asker.actor,
        requester=asker.actor if command.filter == "mine" else None,
        state="running" if command.filter == "running" else None,
    )
    return RunsListed(page, command.filter)


def _cancel(client: DaemonClient, command: CancelCommand, asker: Asker) -> Result:
    return Cancelling(client.cancel_replay(asker.actor, command.run_id))


def _tps(client: DaemonClient, command: TpsCommand, asker: Asker) -> Result:
    return RateChanged(client.set_tps(asker.actor, command.run_id, command.tps))


def _pause_run(client: DaemonClient, command: PauseRunCommand, asker: Asker) -> Result:
    return RateChanged(client.pause_replay(asker.actor, command.run_id))


def _resume_run(client: DaemonClient, command: ResumeRunCommand, asker: Asker) -> Result:
    return RateChanged(client.resume_replay(asker.actor, command.run_id))


def _repair(client: DaemonClient, command: RepairCommand, asker: Asker) -> Result:
    body = RepairBody(confirm_live=asker.confirmed, slack_channel=asker.channel)
    return ReplayCreated(client.repair(asker.actor, command.run_id, body))


def _redrive(client: DaemonClient, command: RedriveCommand, asker: Asker) -> Result:
    body = RepairBody(confirm_live=asker.confirmed, slack_channel=asker.channel)
    return ReplayCreated(client.redrive(asker.actor, command.run_id, body))


def _reconcile(client: DaemonClient, command: ReconcileCommand, asker: Asker) -> Result:
    return ReconcileQueued(command.run_id, client.reconcile(asker.actor, command.run_id))


def _chart(client: DaemonClient, command: ChartCommand, asker: Asker) -> Result:
    return ChartDrawn(command.run_id, client.chart_png(asker.actor, command.run_id))


def _open(client: DaemonClient, command: OpenCommand, asker: Asker) -> Result:
    return PageOpened(client.page_link(asker.actor, command.run_id), command.run_id)


def _sources(client: DaemonClient, command: SourcesCommand, asker: Asker) -> Result:
    return SourcesShown(client.sources(asker.actor), command.source)


def _live_source(client: DaemonClient, actor: str, source: str) -> SourceOut:
    """The source as the catalog has it, with a live topic; refused when it has none."""
    sources = {s.name: s for s in client.sources(actor)}
    found = sources.get(source)
    if found is None:
        raise UnknownSource(source, list(sources))
    if not found.live_topic:
        raise BadRequest(f"source '{source}' has no live topic; use topic=auto")
    return found


def _schedule(client: DaemonClient, command: ScheduleCommand, asker: Asker) -> Result:
    if command.topic == "live" and not asker.confirmed:
        source = _live_source(client, asker.actor, command.source)
        assert source.live_topic is not None, "a live source has a live topic"
        return LiveScheduleToConfirm(command, source.live_topic, source.live_approvals)
    body = ScheduleBody.of(command, confirm_live=asker.confirmed, slack_channel=asker.channel)
    pipeline, created = client.schedule_once(asker.actor, body, idempotency_key=asker.key)
    return Scheduled(pipeline, created)


def _pipelines(client: DaemonClient, command: PipelinesCommand, asker: Asker) -> Result:
    if command.filter == "idle":
        return IdlePipelinesListed(client.idle_pipelines(asker.actor))
    owner = asker.actor if command.filter == "mine" else None
    return PipelinesListed(client.list_pipelines(asker.actor, owner=owner), command.filter)


def _pipeline(client: DaemonClient, command: PipelineCommand, asker: Asker) -> Result:
    return PipelineShown(client.get_pipeline(asker.actor, command.pipeline_id))


def _pause(client: DaemonClient, command: PauseCommand, asker: Asker) -> Result:
    return PipelineChanged(client.pipeline_action(asker.actor, command.pipeline_id, "pause"), "pause")


def _resume(client: DaemonClient, command: ResumeCommand, asker: Asker) -> Result:
    detail = client.get_pipeline(asker.actor, command.pipeline_id)
    if detail.topic_mode == "live" and detail.state == "paused" and not asker.confirmed:
        source = _live_source(client, asker.actor, detail.source)
        if source.live_approvals > 1:
            return LiveResumeToApprove(command, detail, detail.topic)
    return PipelineChanged(client.pipeline_action(asker.actor, command.pipeline_id, "resume"), "resume")


def _unschedule(client: DaemonClient, command: UnscheduleCommand, asker: Asker) -> Result:
    if not asker.confirmed:
        return UnscheduleToConfirm(command, client.get_pipeline(asker.actor, command.pipeline_id))
    return Unscheduled(client.unschedule(asker.actor, command.pipeline_id, confirm=True))


def _lag(client: DaemonClient, command: LagCommand, asker: Asker) -> Result:
    return LagMeasured(
        client.group_lag(asker.actor, command.group, topic=command.topic, cluster=command.cluster)
    )


def _rewind(client: DaemonClient, command: RewindCommand, asker: Asker) -> Result:
    if not asker.confirmed:
        preview = client.rewind(asker.actor, command.group, RewindBody.of(command, preview=True))
        return RewindToConfirm(command, preview)
    body = RewindBody.of(command, preview=False)
    return Rewound(client.rewind(asker.actor, command.group, body, idempotency_key=asker.key))


Call = Callable[[DaemonClient, Any, Asker], Result]

COMMANDS: Mapping[type[Any], Call] = {
    HelpCommand: _help,
    PlanCommand: _plan,
    ReplayCommand: _replay,
    StatusCommand: _status,
    ListCommand: _list,
    CancelCommand: _cancel,
    TpsCommand: _tps,
    PauseRunCommand: _pause_run,
    ResumeRunCommand: _resume_run,
    ReconcileCommand: _reconcile,
    RepairCommand: _repair,
    RedriveCommand: _redrive,
    ChartCommand: _chart,
    OpenCommand: _open,
    SourcesCommand: _sources,
    ScheduleCommand: _schedule,
    PipelinesCommand: _pipelines,
    PipelineCommand: _pipeline,
    PauseCommand: _pause,
    ResumeCommand: _resume,
    UnscheduleCommand: _unschedule,
    LagCommand: _lag,
    RewindCommand: _rewind,
}


def execute(client: DaemonClient, command: Command, asker: Asker) -> Result:
    """The one call ``command`` means, and its typed result; domain errors pass through as raised."""
    call = COMMANDS.get(type(command))
    if call is None:
        raise BadRequest(f"'{type(command).__name__}' has no entry in the command table")
    return call(client, command, asker)
