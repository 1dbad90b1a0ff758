"""The ``/replay`` command language, shared by the Slack bot and the ``replay`` CLI.

One pure parser (text in, frozen command out) so both front ends accept exactly the same input and
give the same errors: each names the offending token, says why, and shows the command's usage.
``render`` is the inverse (``parse(render(c)) == c``), used to echo back what was understood.

help        usage lines and ``help`` text
values      limits, value checks, headers, ``GrammarError``
commands    the frozen commands, which check themselves
groups      ``lag`` and ``rewind``: the consumer-group commands
run_control ``tps``, ``pause`` and ``resume`` on a run: live control of a running replay
sources     ``sources [source]``: what the catalog offers
watch       ``watch=<group>[,<group>]``: the consumer groups a run watches drain
limits      ``Limits``: the platform's maximum rate and workers, shared with the service
forgiving   windows as people type them (dashes, spaced ranges, ``last 6h``), read but never guessed
tokenizer   text -> tokens (shell quoting, Slack's smart quotes)
parser      tokens -> command
renderer    command -> canonical text
predicates  ``where=`` filters: the small predicate language, checked against the table
"""

from daemon.core.cron import parse_cron
from daemon.core.grammar.commands import (
    RUN_OPTIONS,
    SCHEDULE_OPTIONS,
    TRANSACTIONAL_DLQ,
    CancelCommand,
    ChartCommand,
    Command,
    Delivery,
    HelpCommand,
    Incremental,
    ListCommand,
    ListFilter,
    OnError,
    OpenCommand,
    Ordering,
    PauseCommand,
    PipelineCommand,
    PipelineFilter,
    PipelinesCommand,
    PlanCommand,
    ReconcileCommand,
    RedriveCommand,
    RepairCommand,
    ReplayCommand,
    ReplaySpec,
    ResumeCommand,
    ScheduleCommand,
    StatusCommand,
    Timestamp,
    Topic,
    UnscheduleCommand,
)
from daemon.core.grammar.groups import LagCommand, RewindCommand
from daemon.core.grammar.help import GENERAL_USAGE, PREFIX, USAGE, help_text
from daemon.core.grammar.limits import CEILINGS, Limits
from daemon.core.grammar.parser import parse
from daemon.core.grammar.renderer import render
from daemon.core.grammar.run_control import PauseRunCommand, ResumeRunCommand, TpsCommand
from daemon.core.grammar.sources import SourcesCommand
from daemon.core.grammar.tokenizer import tokenize
from daemon.core.grammar.values import (
    MAX_HEADERS,
    MAX_IDLE_DAYS,
    MAX_TPS,
    MAX_WORKERS,
    RESERVED,
    GrammarError,
    check_headers,
    parse_headers,
    render_headers,
)

__all__ = [
    "CEILINGS",
    "GENERAL_USAGE",
    "MAX_HEADERS",
    "MAX_IDLE_DAYS",
    "MAX_TPS",
    "MAX_WORKERS",
    "PREFIX",
    "RESERVED",
    "RUN_OPTIONS",
    "SCHEDULE_OPTIONS",
    "TRANSACTIONAL_DLQ",
    "USAGE",
    "CancelCommand",
    "ChartCommand",
    "Command",
    "Delivery",
    "GrammarError",
    "HelpCommand",
    "Incremental",
    "LagCommand",
    "Limits",
    "ListCommand",
    "ListFilter",
    "OnError",
    "OpenCommand",
    "Ordering",
    "PauseCommand",
    "PauseRunCommand",
    "PipelineCommand",
    "PipelineFilter",
    "PipelinesCommand",
    "PlanCommand",
    "ReconcileCommand",
    "RedriveCommand",
    "RepairCommand",
    "ReplayCommand",
    "ReplaySpec",
    "ResumeCommand",
    "ResumeRunCommand",
    "RewindCommand",
    "ScheduleCommand",
    "SourcesCommand",
    "StatusCommand",
    "Timestamp",
    "Topic",
    "TpsCommand",
    "UnscheduleCommand",
    "check_headers",
    "help_text",
    "parse",
    "parse_cron",
    "parse_headers",
    "render",
    "render_headers",
    "tokenize",
]
