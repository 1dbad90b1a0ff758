"""`/replay`: parse before the ack (pure, fast), call the Replay Service after it (lazy).

The ack itself answers what needs no daemon: a grammar error (the token, why, the usage line) and
`help`. Everything else is answered by `respond()` from a lazy listener, ephemeral, within Slack's
30-minute response_url window; pipeline commands are answered by `bot.listeners.pipeline_actions`. The run's
(and the pipeline's) channel message and thread are posted by the daemon's notifier, not here, so a bot
restart never loses or doubles them.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Any

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient

from bot.channels import channel_problem
from bot.deps import BotDeps
from bot.listeners import confirmations, consumer_groups, pipeline_actions
from bot.replies import answer_with, create_once, key_for
from daemon.contract.models import ReplayBody
from daemon.core.grammar import (
    USAGE,
    CancelCommand,
    ChartCommand,
    Command,
    GrammarError,
    HelpCommand,
    Limits,
    ListCommand,
    PauseRunCommand,
    PlanCommand,
    ReconcileCommand,
    ReplayCommand,
    ResumeRunCommand,
    ScheduleCommand,
    SourcesCommand,
    StatusCommand,
    TpsCommand,
    help_text,
    parse,
    render,
)
from daemon.core.grammar.run_control import CONTROL_WORDS
from daemon.slack import run_messages, source_messages
from daemon.slack.blocks import Message, code, help_message, input_error, notice
from daemon.slack.control_messages import rate_changed_notice
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


def _replay(
    deps: BotDeps, parsed: ReplayCommand, command: dict[str, Any], slack: WebClient | None
) -> Message:
    if parsed.topic == "live":
        return confirmations.ask(deps, parsed, command)
    user = command["user_id"]
    body = ReplayBody.of(parsed, slack_channel=command.get("channel_id"))
    key = key_for("slack-cmd", str(command.get("trigger_id") or command.get("response_url") or ""))
    run = create_once(deps.daemon, user, body, key=key)
    unreachable = channel_problem(slack, command.get("channel_id")) if slack is not None else None
    return run_messages.accepted(run, created=run.created, unreachable=unreachable)


def _plan(deps: BotDeps, parsed: PlanCommand, user: str) -> Message:
    return run_messages.plan_summary(deps.daemon.plan(user, ReplayBody.of(parsed)))


def _cancel(deps: BotDeps, parsed: CancelCommand, user: str) -> Message:
    return run_messages.cancelling(deps.daemon.cancel_replay(user, parsed.run_id))


def _reconcile(deps: BotDeps, parsed: ReconcileCommand, user: str) -> Message:
    job = deps.daemon.reconcile(user, parsed.run_id)
    return notice(
        f":mag: Reconciling `{parsed.run_id}` (as `{job.id}`): its event ids against its topic, in a Spark "
        "job. The verdict follows in the run's thread; `/replay status` shows it too."
    )


def _chart(deps: BotDeps, parsed: ChartCommand, user: str) -> Message:
    run = deps.daemon.get_replay(user, parsed.run_id)
    where = "is in the run's thread" if run.has_series else "is not there yet: the run has no rate series"
    return notice(
        f":chart_with_upwards_trend: The rate chart of `{run.id}` {where}. From a terminal: "
        f"`replay chart {run.id} -o {run.id}.png`."
    )


def _control(
    deps: BotDeps, parsed: TpsCommand | PauseRunCommand | ResumeRunCommand, user: str, zone: tzinfo | None
) -> Message:
    """Live control of a running replay; the run's thread gets the same line from the daemon."""
    if isinstance(parsed, TpsCommand):
        run = deps.daemon.set_tps(user, parsed.run_id, parsed.tps)
    elif isinstance(parsed, PauseRunCommand):
        run = deps.daemon.pause_replay(user, parsed.run_id)
    else:
        run = deps.daemon.resume_replay(user, parsed.run_id)
    return rate_changed_notice(run, actor=user, zone=zone)


def _status(deps: BotDeps, parsed: StatusCommand, user: str, zone: tzinfo | None) -> Message:
    run_id = parsed.run_id
    if run_id is None:
        runs = deps.daemon.list_replays(user, requester=user, limit=1).runs
        if not runs:
            return notice("You have no runs yet.")
        run_id = runs[0].id
    return run_messages.run_status(deps.daemon.get_replay(user, run_id), zone=zone)


def _list(deps: BotDeps, parsed: ListCommand, user: str) -> Message:
    page = deps.daemon.list_replays(
        user,
        requester=user if parsed.filter == "mine" else None,
        state="running" if parsed.filter == "running" else None,
    )
    return run_messages.run_list(page.runs, _LIST_TITLES[parsed.filter])


def _sources(deps: BotDeps, parsed: SourcesCommand, user: str) -> Message:
    sources = deps.daemon.sources(user)
    if parsed.source is None:
        return source_messages.sources_list(sources)
    found = [s for s in sources if s.name == parsed.source]
    if not found:
        return source_messages.unknown_source(parsed.source, sources)
    return source_messages.source_card(found[0])


def answer(
    deps: BotDeps,
    parsed: Command,
    command: dict[str, Any],
    slack: WebClient | None = None,
    zones: UserZones | None = None,
) -> Message | None:
    """The daemon's answer to a parsed command, as a message; None when the ack said it all.

    `slack` (the bot's Web API client) checks that the run's thread can go to the command's channel;
    `zones` gives the asker's time zone, for the times an answer shows (UTC only without it)."""
    user = command["user_id"]

    def zone() -> tzinfo | None:  # asked only by the answers that show a time
        return zones.zone(user) if zones is not None else None

    if isinstance(parsed, ReplayCommand):
        return answer_with(lambda: _replay(deps, parsed, command, slack), usage=USAGE["replay"])
    if isinstance(parsed, PlanCommand):
        return answer_with(lambda: _plan(deps, parsed, user), usage=USAGE["plan"])
    if isinstance(parsed, StatusCommand):
        return answer_with(lambda: _status(deps, parsed, user, zone()), usage=USAGE["status"])
    if isinstance(parsed, ListCommand):
        return answer_with(lambda: _list(deps, parsed, user))
    if isinstance(parsed, CancelCommand):
        return answer_with(lambda: _cancel(deps, parsed, user), usage=USAGE["cancel"])
    if isinstance(parsed, ReconcileCommand):
        return answer_with(lambda: _reconcile(deps, parsed, user), usage=USAGE["reconcile"])
    if isinstance(parsed, ChartCommand):
        return answer_with(lambda: _chart(deps, parsed, user), usage=USAGE["chart"])
    if isinstance(parsed, SourcesCommand):
        return answer_with(lambda: _sources(deps, parsed, user))
    if isinstance(parsed, TpsCommand | PauseRunCommand | ResumeRunCommand):
        usage = USAGE[CONTROL_WORDS[type(parsed)]]
        return answer_with(lambda: _control(deps, parsed, user, zone()), usage=usage)
    if isinstance(parsed, pipeline_actions.PIPELINE_COMMANDS):
        return pipeline_actions.answer(deps, parsed, command)
    if isinstance(parsed, consumer_groups.GROUP_COMMANDS):
        return consumer_groups.answer(deps, parsed, command)
    return None


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
