"""`/replay`: parse before the ack (pure, fast), call the Replay Service after it (lazy).

The ack itself answers what needs no daemon: a grammar error (the token, why, the usage line) and
`help`. Everything else is answered by `respond()` from a lazy listener, ephemeral, within Slack's
30-minute response_url window: the command's call is the shared table's (`daemon.contract.commands`),
and `RENDERERS` turns its result into a message (pipeline and consumer-group results are drawn by their
listener modules, which also own the buttons). The run's (and the pipeline's) channel message and
thread are posted by the daemon's notifier, not here, so a bot restart never loses or doubles them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient

from bot.channels import channel_problem
from bot.deps import BotDeps
from bot.listeners import confirmations, consumer_groups, pipeline_actions, pipeline_approvals
from bot.replies import answer_with, key_for, outcome_of
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
from daemon.core.grammar import (
    USAGE,
    Command,
    GrammarError,
    HelpCommand,
    Limits,
    PlanCommand,
    ReplayCommand,
    ScheduleCommand,
    help_text,
    parse,
    render,
)
from daemon.slack import run_messages, source_messages
from daemon.slack.blocks import Message, code, help_message, input_error, notice
from daemon.slack.control_messages import rate_changed_notice
from daemon.slack.page_messages import OPEN_ACTION, PAGE_LINK_ACTION, page_link
from daemon.slack.user_zones import UserZones

COMMAND = "/replay"
_LIST_TITLES = {"all": "latest", "mine": "yours", "running": "running"}


def slack_text(command: dict[str, Any]) -> str:
    """The text as typed: Slack sends `&`, `<`, `>` as HTML entities (`&amp;` last)."""
    text = str(command.get("text") or "")
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _immediate(command: Command) -> Message | None:
    """What the ack itself says for a command that parsed; None for a silent ack."""
    if isinstance(command, HelpCommand):
        return help_message(help_text(command.topic))
    if isinstance(command, ReplayCommand | PlanCommand | ScheduleCommand):
        echo = code(f"{COMMAND} {render(command)}", limit=400)
        return notice(f"{echo} · asking the Replay Service…")
    return None  # status, list, cancel and the pipeline commands: the answer follows the ack


def acknowledgement(text: str, limits: Limits | None = None) -> Message | None:
    """The ack: the canonical command echoed, or the refusal; rates held to the service's `limits`."""
    try:
        return _immediate(parse(text, limits))
    except GrammarError as err:
        return input_error(err.token, err.reason, err.usage)


@dataclass(frozen=True)
class Reply:
    """What an answer may need besides its result: who asked, where, and in which time zone."""

    deps: BotDeps
    command: dict[str, Any]  # the slash command's payload
    slack: WebClient | None  # checks that the run's thread can go to the command's channel
    zone: Callable[[], tzinfo | None]  # the asker's zone, asked only by the answers that show a time

    @property
    def user(self) -> str:
        return str(self.command["user_id"])


def _accepted(reply: Reply, result: ReplayCreated) -> Message:
    channel = reply.command.get("channel_id")
    unreachable = channel_problem(reply.slack, channel) if reply.slack is not None else None
    return run_messages.accepted(result.run, created=result.run.created, unreachable=unreachable)


def _reconciling(_reply: Reply, result: ReconcileQueued) -> Message:
    return notice(
        f":mag: Reconciling `{result.run_id}` (as `{result.job.id}`): its event ids against its topic, in "
        "a Spark job. The verdict follows in the run's thread; `/replay status` shows it too."
    )


def _chart(_reply: Reply, result: ChartDrawn) -> Message:
    return notice(
        f":chart_with_upwards_trend: The rate chart of `{result.run_id}` is in the run's thread. From a "
        f"terminal: `replay chart {result.run_id} -o {result.run_id}.png`."
    )


def _opened(_reply: Reply, result: PageOpened) -> Message:
    what = f"the page of `{result.run_id}`" if result.run_id else "the console"
    return page_link(result.link, what)


def _sources(_reply: Reply, result: SourcesShown) -> Message:
    if result.name is None:
        return source_messages.sources_list(result.sources)
    found = [s for s in result.sources if s.name == result.name]
    if not found:
        return source_messages.unknown_source(result.name, result.sources)
    return source_messages.source_card(found[0])


def _in_groups(reply: Reply, result: Any) -> Message:
    return consumer_groups.message_for(reply.deps, result, reply.command)


def _in_pipelines(reply: Reply, result: Any) -> Message:
    return pipeline_actions.message_for(reply.deps, result, reply.command)


# One answer per result of the shared command table (`tests/contract` checks none is missing).
RENDERERS: dict[type[Any], Callable[[Reply, Any], Message | None]] = {
    HelpShown: lambda _reply, _result: None,  # the ack showed the help
    Planned: lambda _reply, r: run_messages.plan_summary(r.plan),
    ReplayCreated: _accepted,
    RunShown: lambda reply, r: run_messages.run_status(r.run, zone=reply.zone()),
    RunsListed: lambda _reply, r: run_messages.run_list(r.page.runs, _LIST_TITLES[r.filter]),
    Cancelling: lambda _reply, r: run_messages.cancelling(r.run),
    # the run's thread gets the same line from the daemon
    RateChanged: lambda reply, r: rate_changed_notice(r.run, actor=reply.user, zone=reply.zone()),
    ReconcileQueued: _reconciling,
    ChartDrawn: _chart,
    PageOpened: _opened,
    SourcesShown: _sources,
    LiveReplayToConfirm: lambda reply, r: confirmations.ask(reply.deps, r, reply.command),
    LagMeasured: _in_groups,
    RewindToConfirm: _in_groups,
    Rewound: _in_groups,
    Scheduled: _in_pipelines,
    PipelinesListed: _in_pipelines,
    IdlePipelinesListed: _in_pipelines,
    PipelineShown: _in_pipelines,
    PipelineChanged: _in_pipelines,
    Unscheduled: _in_pipelines,
    LiveScheduleToConfirm: _in_pipelines,
    LiveResumeToApprove: lambda reply, r: pipeline_approvals.ask_resume(
        reply.deps, r, reply.command, reply.slack
    ),
    UnscheduleToConfirm: _in_pipelines,
}


def usage_of(parsed: Command) -> str | None:
    """The usage line shown with a refusal of bad input to this command."""
    word = "replay" if isinstance(parsed, ReplayCommand) else render(parsed).split(" ", 1)[0]
    return USAGE.get(word)


def answer(
    deps: BotDeps,
    parsed: Command,
    command: dict[str, Any],
    slack: WebClient | None = None,
    zones: UserZones | None = None,
) -> Message | None:
    """The daemon's answer to a parsed command, as a message; None when the ack said it all.

    The command's call is the shared table's (`daemon.contract.commands`); this only renders it.
    `slack` (the bot's Web API client) checks that the run's thread can go to the command's channel;
    `zones` gives the asker's time zone, for the times an answer shows (UTC only without it)."""
    if isinstance(parsed, HelpCommand):
        return None  # the ack answered it
    user = command["user_id"]
    asker = Asker(
        actor=user,
        key=key_for("slack-cmd", str(command.get("trigger_id") or command.get("response_url") or "")),
        channel=command.get("channel_id"),
    )

    def zone() -> tzinfo | None:  # asked only by the answers that show a time
        return zones.zone(user) if zones is not None else None

    reply = Reply(deps, command, slack, zone)

    def work() -> Message | None:
        result = execute(deps.daemon, parsed, asker)
        return RENDERERS[type(result)](reply, result)

    return answer_with(work, usage=usage_of(parsed))


def register(app: App, deps: BotDeps) -> None:
    zones = UserZones(app.client)  # one cache for every command: users.info once per user an hour

    def ack_replay(ack: Ack, command: dict[str, Any]) -> None:
        message = acknowledgement(slack_text(command), deps.limits)
        if message is None:
            ack()
        else:
            ack(**message.ephemeral())

    def run_replay(command: dict[str, Any], respond: Respond, client: WebClient) -> None:
        try:
            parsed = parse(slack_text(command), deps.limits)
        except GrammarError:
            return  # the ack already told the user what was wrong
        message = answer(deps, parsed, command, client, zones)
        if message is not None:
            respond(**message.ephemeral())

    app.command(COMMAND)(ack=ack_replay, lazy=[run_replay])

    def ack_open(ack: Ack) -> None:
        ack()  # the button's URL opened the page in the browser: Slack only wants the click acked

    app.action(OPEN_ACTION)(ack_open)

    def send_link(body: dict[str, Any], respond: Respond) -> None:
        """A run card's *Open its page*: the clicker's own link, for their eyes only; the card stays."""
        clicker, run_id = body["user"]["id"], str(body["actions"][0].get("value", ""))

        def work() -> Message:
            return page_link(deps.daemon.page_link(clicker, run_id), f"the page of `{run_id}`")

        message, _ = outcome_of(work)
        respond(**message.ephemeral(replace_original=False))

    app.action(PAGE_LINK_ACTION)(ack=ack_open, lazy=[send_link])
