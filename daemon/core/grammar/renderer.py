"""Commands back to text: ``parse(render(c)) == c``, used to echo back what was understood.

The text is canonical (fixed option order, defaults omitted), so two ways of typing the same
command render the same, and a rendered command can be stored and parsed again later.
"""

from __future__ import annotations

from daemon.core.grammar.auto import render_auto
from daemon.core.grammar.commands import (
    ACTION_WORDS,
    CancelCommand,
    ChartCommand,
    Command,
    HelpCommand,
    ListCommand,
    OpenCommand,
    PipelinesCommand,
    PlanCommand,
    ReconcileCommand,
    RedriveCommand,
    RepairCommand,
    ReplayCommand,
    ReplaySpec,
    ScheduleCommand,
    StatusCommand,
)
from daemon.core.grammar.drain import render_drain_groups
from daemon.core.grammar.groups import LagCommand, RewindCommand, render_group_command
from daemon.core.grammar.predicates import render_predicate
from daemon.core.grammar.run_control import (
    PauseRunCommand,
    ResumeRunCommand,
    TpsCommand,
    render_run_control,
)
from daemon.core.grammar.selection import render_listed
from daemon.core.grammar.shaped import render_speed
from daemon.core.grammar.sources import SourcesCommand, render_sources
from daemon.core.grammar.tokenizer import WHERE
from daemon.core.grammar.values import render_headers
from daemon.core.quantities import render_duration
from daemon.core.windows import label

_SHELL_SPECIAL = frozenset(" \"'\\")


def _quote(value: str) -> str:
    """Double-quote a value only when the tokenizer would otherwise split or alter it."""
    if value and not _SHELL_SPECIAL.intersection(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _render_spec(spec: ReplaySpec) -> list[str]:
    parts = [spec.source, label(spec.window, spec.tz)]
    if spec.tz is not None:
        parts.append(f"tz={spec.tz}")
    if spec.speed is not None:
        parts += ["tps=original", f"speed={render_speed(spec.speed)}"]
        if spec.tps is not None:
            parts.append(f"max={spec.tps}")
    elif spec.tps is not None:
        parts.append(f"tps={spec.tps}")
    if spec.auto is not None:
        parts += render_auto(spec.auto)
    if spec.topic != "auto":
        parts.append(f"topic={spec.topic}")
    if spec.headers:
        parts.append("headers=" + _quote(render_headers(spec.headers)))
    if spec.workers is not None:
        parts.append(f"workers={spec.workers}")
    if spec.ordering != "entity":
        parts.append(f"ordering={spec.ordering}")
    if spec.force:
        parts.append("force=yes")
    if spec.timestamp is not None:
        parts.append(f"timestamp={spec.timestamp}")
    if spec.on_error is not None:
        parts.append(f"on_error={spec.on_error}")
    if spec.delivery is not None:
        parts.append(f"delivery={spec.delivery}")
    if spec.watch:
        parts.append(f"watch={render_drain_groups(spec.watch)}")
    if spec.ramp_s is not None:
        parts.append(f"ramp={render_duration(spec.ramp_s)}")
    if spec.max_mb is not None:
        parts.append(f"max_mb={spec.max_mb}")
    for name in ("keys", "types", "fields"):
        if getattr(spec, name):
            parts.append(f"{name}=" + _quote(render_listed(getattr(spec, name))))
    if spec.keys_file is not None:
        parts.append("keys=" + _quote("@" + spec.keys_file))
    if spec.snapshot is not None:
        parts.append(f"snapshot={spec.snapshot}")
    if spec.where is not None:  # last, unquoted: the tokenizer reads a filter to the end
        parts.append(WHERE + render_predicate(spec.where))
    return parts


def _render_schedule(command: ScheduleCommand) -> list[str]:
    parts = ["schedule", command.source]
    if command.every_seconds is not None:
        parts.append(f"every={render_duration(command.every_seconds)}")
    if command.cron is not None:
        parts.append("cron=" + _quote(command.cron))
    if command.incremental == "snapshot":
        parts.append("incremental=snapshot")
    else:
        parts.append(f"watermark={command.watermark}")
    if command.tps is not None:
        parts.append(f"tps={command.tps}")
    if command.topic != "auto":
        parts.append(f"topic={command.topic}")
    if command.lookback_seconds:
        parts.append(f"lookback={render_duration(command.lookback_seconds)}")
    if command.headers:
        parts.append("headers=" + _quote(render_headers(command.headers)))
    if command.idle_after_days is not None:
        parts.append(f"idle_after={command.idle_after_days}d")
    if command.on_error is not None:
        parts.append(f"on_error={command.on_error}")
    if command.watch:
        parts.append(f"watch={render_drain_groups(command.watch)}")
    if command.where is not None:  # last, unquoted: the tokenizer reads a filter to the end
        parts.append(WHERE + render_predicate(command.where))
    return parts


def render(command: Command) -> str:
    """Canonical text of a command (fixed option order, defaults omitted); ``parse`` reads it back."""
    if isinstance(command, PlanCommand):
        return " ".join(["plan", *_render_spec(command)])
    if isinstance(command, ReplayCommand):
        return " ".join(_render_spec(command))
    if isinstance(command, ScheduleCommand):
        return " ".join(_render_schedule(command))
    if isinstance(command, StatusCommand):
        return "status" if command.run_id is None else f"status {command.run_id}"
    if isinstance(command, CancelCommand):
        return f"cancel {command.run_id}"
    if isinstance(command, ReconcileCommand):
        return f"reconcile {command.run_id}"
    if isinstance(command, RepairCommand):
        return f"repair {command.run_id}"
    if isinstance(command, RedriveCommand):
        return f"redrive {command.run_id}"
    if isinstance(command, ChartCommand):
        return f"chart {command.run_id}"
    if isinstance(command, OpenCommand):
        return "open" if command.run_id is None else f"open {command.run_id}"
    if isinstance(command, ListCommand):
        return "list" if command.filter == "all" else f"list {command.filter}"
    if isinstance(command, PipelinesCommand):
        return "pipelines" if command.filter == "all" else f"pipelines {command.filter}"
    if isinstance(command, HelpCommand):
        return "help" if command.topic is None else f"help {command.topic}"
    if isinstance(command, LagCommand | RewindCommand):
        return render_group_command(command)
    if isinstance(command, TpsCommand | PauseRunCommand | ResumeRunCommand):
        return render_run_control(command)
    if isinstance(command, SourcesCommand):
        return render_sources(command)
    return f"{ACTION_WORDS[type(command)]} {command.pipeline_id}"
