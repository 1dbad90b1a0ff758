"""A scheduled pipeline's messages: its summary (the thread its runs report in), the bot's answers,
the confirmations before a live schedule or an unschedule, and one line per reported run."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from daemon.contract.models import IdlePipelineOut, PipelineDetailOut, PipelineOut, RunOut, ScheduleBody
from daemon.core.clusters import DEFAULT_CLUSTER
from daemon.slack.blocks import (
    MAX_LINE,
    Message,
    buttons,
    clip,
    code,
    context,
    count,
    escape,
    fields,
    fit,
    header,
    human_duration,
    listing,
    mention,
    message,
    notice,
    owners_line,
    section,
    sections,
    when,
)
from daemon.slack.run_messages import run_icon, run_line
from daemon.slack.views import PipelineView

MAX_LISTED_PIPELINES = 15
MAX_DETAIL_RUNS = 5  # 5 run lines of at most MAX_LINE characters fit one section without cutting a mention
SCHEDULE_LIVE_CONFIRM_ACTION = "pipeline_live_confirm"
SCHEDULE_LIVE_CANCEL_ACTION = "pipeline_live_cancel"
UNSCHEDULE_CONFIRM_ACTION = "pipeline_unschedule_confirm"
UNSCHEDULE_KEEP_ACTION = "pipeline_unschedule_keep"
PIPELINE_LIVE_APPROVE_ACTION = "pipeline_live_approve"

_WATERMARK_RANGE = re.compile(r"(?P<commits>commits )?\((?P<low>.*), (?P<high>.*)\]", re.DOTALL)
_PIPELINE_ICON = {"active": ":calendar:", "paused": ":double_vertical_bar:", "archived": ":file_cabinet:"}


def pipeline_icon(state: str) -> str:
    return _PIPELINE_ICON.get(state, ":grey_question:")


def next_run(view: PipelineView) -> str:
    if view.state == "paused":
        return f"paused (`/replay resume {escape(view.pipeline_id)}`)"
    if view.state == "archived":
        return "never (unscheduled)"
    return when(view.next_run_at)


def _follows(view: PipelineView) -> tuple[str, str]:
    """What the pipeline follows, and where it stands: a column and its committed value, or the
    table's commits and the last snapshot published."""
    committed = code(view.watermark) if view.watermark else "nothing yet"
    if view.watermark_column is None:
        return "Follows", f"the table's commits (`incremental=snapshot`; last published: {committed})"
    return "Watermark column", f"{code(view.watermark_column)} (committed: {committed})"


def pipeline_fields(view: PipelineView) -> dict[str, Any]:
    return fields(
        [
            ("Source", escape(view.source)),
            ("Schedule", code(view.schedule)),
            _follows(view),
            ("Target topic", _target(view)),
            ("Rate", f"{view.tps:,}/s"),
            ("Owners", owners_line(view.owners)),
            ("Next run", next_run(view)),
            ("State", f"{pipeline_icon(view.state)} {escape(view.state)}"),
        ]
    )


def _target(view: PipelineView) -> str:
    """Its topic, and its Kafka cluster unless it is the default one."""
    on = "" if view.cluster == DEFAULT_CLUSTER else f" on {code(view.cluster)}"
    return code(view.topic, limit=300) + on


def _title(view: PipelineView) -> str:
    return f"Pipeline {view.pipeline_id} · {view.source} · {view.schedule}"


def _text(view: PipelineView) -> str:
    return (
        f"{pipeline_icon(view.state)} Pipeline {view.pipeline_id}: {escape(clip(view.source, 80))} "
        f"{escape(clip(view.schedule, 130))} {escape(clip(_option(view), 130))} "
        f"→ {escape(clip(view.topic, 300))} at {view.tps:,}/s; next run {next_run(view)}"
    )


def _option(view: PipelineView) -> str:
    if view.watermark_column is None:
        return "incremental=snapshot"
    return f"watermark={view.watermark_column}"


def pipeline_summary(view: PipelineView) -> Message:
    """The channel message of a new pipeline: its runs reply in its thread."""
    pid = escape(view.pipeline_id)
    footer = (
        f"Each run that publishes or fails reports in this thread · `/replay pipeline {pid}` · "
        f"`/replay pause {pid}` · `/replay unschedule {pid}`"
    )
    return message(_text(view), header(_title(view)), pipeline_fields(view), context(footer))


def pipeline_scheduled_reply(view: PipelineView, *, announced: bool) -> Message:
    """The requester's ephemeral answer: the id, the next run, where the runs will report."""
    where = (
        "Its runs report in this channel, in the pipeline's thread."
        if announced
        else f"Follow it with `/replay pipeline {escape(view.pipeline_id)}`."
    )
    text = (
        f":calendar: Scheduled as `{escape(view.pipeline_id)}`: {escape(clip(view.source, 80))} "
        f"{code(view.schedule)} → {code(view.topic, limit=300)}. Next run: {next_run(view)}. {where}"
    )
    return message(text, section(text), pipeline_fields(view))


def pipeline_changed(view: PipelineView, action: str) -> Message:
    """After pause / resume: what it means for the next run."""
    pid = escape(view.pipeline_id)
    if view.state == "paused":
        text = f":double_vertical_bar: Paused `{pid}`: no runs until `/replay resume {pid}`."
    else:
        text = f":arrow_forward: {escape(action.capitalize())}d `{pid}`: next run {next_run(view)}."
    return message(text, *sections(text))


def pipeline_line(pipeline: PipelineOut) -> str:
    """One pipeline in a list; an idle one says when it goes unless kept."""
    view = PipelineView.of(pipeline)
    line = (
        f"{pipeline_icon(view.state)} `{escape(view.pipeline_id)}` {escape(clip(view.source, 80))} "
        f"{code(view.schedule, limit=60)} → {code(view.topic, limit=100)} · {escape(view.state)}"
    )
    if isinstance(pipeline, IdlePipelineOut):
        line += f" · removed after {when(pipeline.deadline)} unless kept"
    elif view.state == "active":
        line += f" · next run {when(view.next_run_at)}"
    return clip(line, MAX_LINE)


def pipeline_list(pipelines: Sequence[PipelineOut], title: str) -> Message:
    """`/replay pipelines [mine|idle]`."""
    shown = [pipeline_line(p) for p in pipelines[:MAX_LISTED_PIPELINES]]
    return listing("Pipelines", title, shown, len(pipelines))


def pipeline_detail(detail: PipelineDetailOut) -> Message:
    """`/replay pipeline <id>`: the summary, then its last runs."""
    view = PipelineView.of(detail)
    lines = [run_line(run) for run in detail.runs[:MAX_DETAIL_RUNS]]
    last = "*Last runs*\n" + ("\n".join(lines) if lines else "no runs yet")
    published = when(view.last_published_at, "never")
    return message(
        _text(view),
        header(_title(view)),
        pipeline_fields(view),
        section(last),
        context(f"Last published: {published} · created {when(view.created_at)}"),
    )


def live_schedule_confirmation(
    schedule: ScheduleBody, *, live_topic: str, value: str, expires_in_s: float, approvals: int = 1
) -> Message:
    """Buttons before a pipeline may publish into a live topic on every run; nothing exists yet."""
    speed = f"{schedule.tps:,}/s" if schedule.tps else "the platform default"
    when_text = f"every={schedule.every}" if schedule.every else f"cron={schedule.cron}"
    warning = (
        f":warning: This pipeline publishes into the *live* topic {code(live_topic, limit=300)} on every run "
        f"({code(when_text)}): every consumer of it sees the new rows of "
        f"{escape(clip(schedule.source, 80))}. Confirm within {human_duration(expires_in_s)}."
    )
    if approvals > 1:
        warning += " Then a second owner of the source approves it in the channel."
    shown = fields(
        [
            ("Source", escape(schedule.source)),
            ("Schedule", code(when_text)),
            (
                ("Watermark column", code(schedule.watermark))
                if schedule.watermark is not None
                else ("Follows", "the table's commits (`incremental=snapshot`)")
            ),
            ("Target topic", f"{code(live_topic, limit=300)} (live)"),
            ("Rate", speed),
        ]
    )
    actions = buttons(
        "pipeline_live",
        (SCHEDULE_LIVE_CONFIRM_ACTION, "Schedule into the live topic", value, "danger"),
        (SCHEDULE_LIVE_CANCEL_ACTION, "Cancel", value, None),
    )
    return message(warning, section(warning), shown, actions)


def live_pipeline_approval_request(
    *, asks: str, source: str, live_topic: str, requester: str, value: str, expires_in_s: float
) -> Message:
    """Posted in the channel: another owner's click creates (or resumes) the live pipeline.

    ``asks`` says what is asked, e.g. "to schedule `every=1h`" or "to resume `p-…`"."""
    text = (
        f":raised_hand: {mention(requester)} asks {asks}, publishing {escape(clip(source, 80))} into the "
        f"*live* topic {code(live_topic, limit=300)} on every run. Another owner of "
        f"{escape(clip(source, 80))} must approve within {human_duration(expires_in_s)}."
    )
    actions = buttons(
        "pipeline_live_approval", (PIPELINE_LIVE_APPROVE_ACTION, "Approve the live pipeline", value, "danger")
    )
    return message(text, section(text), actions)


def unschedule_confirmation(view: PipelineView, *, value: str, expires_in_s: float) -> Message:
    pid = escape(view.pipeline_id)
    text = (
        f":warning: Unschedule `{pid}` ({escape(clip(view.source, 80))} {code(view.schedule)})? "
        f"It stops for good: no more runs (its history stays). Answer within {human_duration(expires_in_s)}."
    )
    actions = buttons(
        "pipeline_unschedule",
        (UNSCHEDULE_CONFIRM_ACTION, "Unschedule", value, "danger"),
        (UNSCHEDULE_KEEP_ACTION, "Keep it", value, None),
    )
    return message(text, section(text), pipeline_fields(view), actions)


def unscheduled(view: PipelineView) -> Message:
    pid = escape(view.pipeline_id)
    history = f"Its run history stays (`/replay pipeline {pid}`)."
    if view.state == "archived":
        return notice(
            f":file_cabinet: Unscheduled `{pid}`: no more runs; what it made for itself (its topic, its "
            f"application) is removed and its owners told. {history}"
        )
    return notice(
        f":file_cabinet: Unscheduling `{pid}`: no more runs. Its run in flight is being stopped; then its "
        f"topic and application are removed and its owners told. {history}"
    )


# --- a pipeline run, in its pipeline's thread -------------------------------------------------------------


def watermark_high(window: str) -> str | None:
    """The upper bound of a pipeline run's range label `(low, high]`; None for anything else."""
    found = _WATERMARK_RANGE.fullmatch(window)
    return found["high"] if found else None


def _next_step(run: RunOut) -> str:
    reason = (run.failure_reason or "").lower()
    pid = escape(run.pipeline_id or "")
    retry = "the watermark did not move, so the next scheduled run sends this range again"
    if run.failure_kind == "launch":
        return f"the job never started: ask the platform team to check the launcher; {retry}"
    if any(word in reason for word in ("broker", "kafka", "timed out", "timeout", "delivery")):
        return f"check the cluster; {retry} (duplicates keep their event ids)"
    return f"see `/replay pipeline {pid}`; {retry} (`/replay pause {pid}` holds it meanwhile)"


def pipeline_run_line(run: RunOut) -> Message:
    """One line per reported run in the pipeline's thread: what landed, or why not and what next."""
    head = f"{escape(run.pipeline_id or '')} run {escape(run.id)}"
    if run.state == "succeeded":
        high = watermark_high(run.window or "")
        mark = "snapshot" if (run.window or "").startswith("commits ") else "watermark"
        moved = f" ({mark} → {escape(clip(high, 120))})" if high else ""
        text = f":white_check_mark: {head}: {count(run.confirmed)} events confirmed{moved}"
        if run.reconcile is not None:  # every event id of the run, once: the proof, in one line
            text += f" · reconcile {escape(clip(run.reconcile.verdict().text, 300))}"
    elif run.state == "cancelled":
        text = (
            f":no_entry_sign: {head} was cancelled after {count(run.confirmed)} events were confirmed; "
            "the watermark did not move, so the next run sends them again"
        )
    elif run.state == "failed":
        reason = fit(escape(run.failure_reason or "no reason was reported"), 800)
        text = (
            f":x: {head} failed after {count(run.confirmed)} events were confirmed: {reason}\n"
            f"*Next step:* {_next_step(run)}"
        )
    else:
        why = fit(escape(run.failure_reason or ""), 300)
        text = f"{run_icon(run.state)} {head}: {escape(run.state)} ({why})"
    return message(text, *sections(text))
