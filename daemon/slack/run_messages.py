"""A run's messages: its thread (announcement, progress, final word), status lines, and plans.

The thread is posted by the daemon's notifier; the replies (`accepted`, `run_status`, lists, plans and
the live-topic confirmation) by the bot. Both read the wire's `RunOut`, so a run looks the same
everywhere and each fact has the one name it has from the store to Slack.
(Over 400 lines: a run's card, thread, status and plan share their helpers and are kept side by side.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, tzinfo
from typing import Any

from daemon.contract.models import PlanOut, RunOut
from daemon.core.clusters import DEFAULT_CLUSTER
from daemon.core.quantities import render_place
from daemon.core.rate_shape import rate_label, shape_note
from daemon.core.states import TERMINAL_RUN_STATES
from daemon.slack.blocks import (
    MAX_LINE,
    Message,
    buttons,
    clip,
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
    rate,
    section,
    sections,
    when,
)
from daemon.slack.group_messages import rewind_hint
from daemon.slack.page_messages import open_button
from daemon.slack.run_report import (
    on_topic_line,
    out_of_memory,
    pinned_window,
    report_line,
    rerun_command,
    run_verdict,
    times_line,
    verdict_lines,
)
from daemon.slack.zones import clock_time, date_time

MAX_LISTED_RUNS = 15
CONFIRM_ACTION = "replay_live_confirm"
CANCEL_ACTION = "replay_live_cancel"
APPROVE_ACTION = "replay_live_approve"
_CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{2,20}")

_STATE_ICON = {
    "queued": ":hourglass_flowing_sand:",
    "submitted": ":hourglass_flowing_sand:",
    "running": ":arrow_forward:",
    "cancelling": ":octagonal_sign:",
    "succeeded": ":white_check_mark:",
    "failed": ":x:",
    "cancelled": ":no_entry_sign:",
    "skipped": ":fast_forward:",
}


def run_icon(state: str) -> str:
    return _STATE_ICON.get(state, ":grey_question:")


def _out_of(run: RunOut) -> str:
    """What the confirmed count is out of, saying whose count it is."""
    if run.rows_selected is not None:
        return f"of {count(run.rows_selected)} selected"
    if run.rows is not None:
        return f"of {count(run.rows)} planned"
    return "the job reported no row count"


def set_aside(run: RunOut) -> str | None:
    """``dlq=N``: records the broker refused or the job could not encode or decrypt, parked on the
    dead-letter topic; None when there are none, or when nobody knows (never shown as 0)."""
    if not run.dead_lettered:
        return None
    where = f" in `{escape(run.dlq_topic)}`" if run.dlq_topic else ""
    return (
        f":warning: {count(run.dead_lettered)} set aside{where} (dlq={run.dead_lettered:,}): records "
        "that could not be published; each names its reason in its `replay-error` header."
    )


def next_step(run: RunOut) -> str:
    """A suggestion for a failed or cancelled run, from its reason; never empty."""
    reason = (run.failure_reason or "").lower()
    rerun = f"`{escape(rerun_command(run))}`"
    if run.state == "cancelled":
        return f"run {rerun} to start again (a new run publishes the whole window again)"
    if out_of_memory(reason):
        where = "the driver" if "driver" in reason else "an executor"
        return (
            f"{where} ran out of memory: ask the platform team to raise `emr.executor_memory_gb` "
            "(`emr.driver_memory_gb` for the driver; `spark.executor.memory` / `spark.driver.memory` on a "
            f"local launcher), or spread the rows over more tasks with `workers=`, then re-run {rerun}"
        )
    if run.failure_kind == "launch":
        return (
            "the job never started: ask the platform team to check the launcher, then run the command again"
        )
    if "cannot be published" in reason or "cannot decrypt" in reason:
        return (
            "a record could not be published (its event id is in the reason): fix it at the source, "
            f"or re-run `{escape(rerun_command(run))} on_error=dlq` to set such records aside and "
            "publish the rest"
        )
    if run.failure_kind == "lost":
        return (
            "the job stopped without reporting a result; its last output (in the reason) says why, if "
            f"anything does. Check it with the platform team, then re-run {rerun}"
        )
    if any(word in reason for word in ("broker", "kafka", "timed out", "timeout", "delivery")):
        return (
            "the broker refused or timed out: check the cluster, then re-run; duplicates of what was "
            f"already confirmed carry the same event ids and are absorbable: {rerun}"
        )
    return f"see the job's output with `/replay status {escape(run.id)}`, then re-run {rerun}"


# --- the run's thread -----------------------------------------------------------------------------------


def _where_note(run: RunOut, redirected: tuple[str, str] | None) -> str | None:
    """Why the thread is in a DM: the channel Slack refused and its answer, on the first post."""
    if redirected is not None:
        channel, error = redirected
        shown = f"<#{channel}>" if _CHANNEL_ID.fullmatch(channel) else f"`{escape(channel)}`"
        return (
            f":warning: I could not post in {shown} (Slack said `{escape(error)}`), so this run's thread "
            "is here. Invite me there (`/invite @replay`) for the next runs."
        )
    if run.slack_channel and run.slack_channel.startswith("D"):
        return "This run's thread is in your direct messages with me."
    return None


def _window(run: RunOut) -> str:
    """The window as typed and, for a relative one, the bounds it was pinned to; then its filter."""
    pinned = pinned_window(run)
    shown = f"`{escape(run.window or '')}`"
    text = f"{shown} = `{escape(pinned)}`" if pinned != (run.window or "") else f"{shown} (UTC)"
    return text + _filter(run.where) + _keys_file(run.keys_file, None) + _fields(run.fields)


def _erasures(plan: PlanOut) -> str:
    """What the source's erasure list will leave out: its keys and version, applied as the run reads."""
    if plan.erasures is None:
        return ""
    version = f" as of {date_time(plan.erasures_as_of, None)}" if plan.erasures_as_of else ""
    return f", less the events of {count(plan.erased_keys)} erased keys (erasure list{version})"


def _keys_file(path: str | None, keys: int | None) -> str:
    if path is None:
        return ""
    counted = f"{count(keys)} " if keys is not None else ""
    return f", the {counted}keys in `{escape(path)}`"


def _fields(fields: list[str]) -> str:
    return f", fields `{escape(','.join(fields))}`" if fields else ""


def _filter(where: str | None) -> str:
    """``, where <filter>`` (canonical), cut short in a card (a Slack field holds 2,000 characters);
    `/replay status` and the CLI show it whole."""
    if where is None:
        return ""
    shown = where if len(where) <= FILTER_SHOWN else where[: FILTER_SHOWN - 1] + "…"
    return f", where `{escape(shown)}`"


def _source(name: str, snapshot: str | None, listed_files: int | None = None) -> str:
    """The source, with the table snapshot the run reads when the table has snapshots, or the files
    its plan listed when it has none."""
    if snapshot is not None:
        return f"{escape(name)} at snapshot `{escape(snapshot)}`"
    if listed_files is not None:
        files = "1 file" if listed_files == 1 else f"{listed_files:,} files"
        return f"{escape(name)} as its plan listed it ({files})"
    return escape(name)


FILTER_SHOWN = 300  # characters of a filter a card shows


def run_parent(
    run: RunOut, *, redirected: tuple[str, str] | None = None, page_url: str | None = None
) -> Message:
    """The channel message of a run: what, how much, where, how fast; final counts once it ended.

    `redirected` = (channel, Slack's error) when the thread went to the requester's DM instead;
    `page_url`: the run's page, linked in the footer, with a button that sends the clicker a link that
    signs them in (reading it needs a session)."""
    icon, final = run_icon(run.state), run.state in TERMINAL_RUN_STATES
    pairs = [
        ("Source", _source(run.source, run.snapshot, run.listed_files)),
        ("Window", _window(run)),
        ("Rows", count(run.rows)),
        ("Target topic", _topic(run.topic, run.delivery, cluster=run.cluster)),
        ("Rate", rate_label(run.tps, run.ramp_s, run.max_mb, run.speed)),
        ("ETA", human_duration(run.duration_estimate_s)),
        ("Requested by", mention(run.requester)),
        ("State", f"{icon} {escape(run.state)}{_place(run)}"),
    ]
    footer = [f"Progress follows in the thread · `/replay cancel {escape(run.id)}` stops it."]
    if final:
        pairs[5] = ("Took", human_duration(run.duration_s))
        confirmed = f"{count(run.confirmed)} ({_out_of(run)})"
        if run.dead_lettered:  # Slack shows at most 10 fields: the count joins the confirmed one
            confirmed += f"; dlq={run.dead_lettered:,} set aside"
        pairs.append(("Confirmed by the broker", confirmed))
        pairs.append(("Achieved rate", rate(run.achieved_tps)))
        footer = ["Final report in the thread."]
        if run.reconcile is not None:
            footer.append(f"Reconcile: {escape(clip(run_verdict(run.reconcile).text, MAX_LINE))}")
    if note := _where_note(run, redirected):
        footer.append(note)
    if run.delivery == "transactional":
        footer.append(TRANSACTIONAL_NOTE)
    if page_url is not None:
        footer.append(f"<{page_url}|Its page> (first time? *Open its page* sends you a link to sign in)")
    title = f"Replay {run.id} · {run.source} · {run.state}"
    text = (
        f"{icon} Replay {run.id}: {escape(run.source)} {escape(run.window or '')} → {escape(run.topic)} "
        f"at {run.tps:,}/s ({count(run.rows)} rows) — {run.state}"
    )
    if run.reconcile is not None and run.reconcile.repaired_by:  # the repair its verdict came from
        footer.append(f"Repaired by `{escape(run.reconcile.repaired_by)}`.")
    if run.repair_of is not None:  # a repair: which run it completes
        footer.insert(0, f"Repairs `{escape(run.repair_of)}`: only the ids its reconcile found missing.")
    if run.redrive_of is not None:  # a redrive: whose dead letters it sends back
        footer.insert(0, f"Redrives the dead letters of `{escape(run.redrive_of)}`.")
    blocks = [header(title), fields(pairs), context(*footer)]
    return message(text, *blocks, open_button(run.id)) if page_url is not None else message(text, *blocks)


TRANSACTIONAL_NOTE = (
    "Sent in Kafka transactions: consumers that read committed records (isolation.level=read_committed) "
    "see each event once, retries included; read uncommitted, an aborted attempt's records show too."
)


def _topic(
    topic: str, delivery: str, partitions: int | None = None, *, cluster: str = DEFAULT_CLUSTER
) -> str:
    """The target topic's field: its name, its partitions when known, how records go to it, and its
    Kafka cluster unless it is the default one (most estates have one)."""
    text = f"`{escape(topic)}`" + (f" ({partitions} partitions)" if partitions is not None else "")
    text += "" if cluster == DEFAULT_CLUSTER else f" on `{escape(cluster)}`"
    return text + (" · transactional" if delivery == "transactional" else "")


def _place(run: RunOut) -> str:
    """`, 2nd in line` for a run waiting for a launcher slot; empty otherwise."""
    if run.state != "queued" or run.queue_position is None:
        return ""
    return f", {render_place(run.queue_position)}"


def progress_reply(
    run: RunOut, *, rate_now: float | None = None, as_of: datetime | None = None, zone: tzinfo | None = None
) -> Message:
    """The one progress message, edited in place: confirmed so far, share, rate (`rate_now`, from the
    watcher's last samples), time left, when read (`as_of`, in `zone`, the requester's, UTC beside)."""
    icon = run_icon(run.state) if run.state in TERMINAL_RUN_STATES else ":hourglass_flowing_sand:"
    rows = run.rows
    if run.state == "queued" and run.queue_position is not None:
        text = (
            f"{icon} Queued{_place(run)}: it starts when a running job ends (the launcher runs a few at "
            "a time, so each keeps its rate); progress shows here then."
        )
    elif run.confirmed == 0 and run.state in ("queued", "submitted"):
        text = f"{icon} Starting… progress shows here, in this one message, as the broker confirms events."
    else:
        done = f"*{count(run.confirmed)}*"
        if rows and run.confirmed is not None:
            percent = min(100.0, 100.0 * run.confirmed / rows)
            done += f" of {count(rows)} confirmed ({percent:.0f}%)"
        elif rows:
            done += f" of {count(rows)} confirmed"
        else:
            done += " confirmed"
        if run.state in TERMINAL_RUN_STATES:
            tail = f" · {escape(run.state)}, final report below"
        elif run.paused:  # live control: the tasks hold their place until resumed
            tail = f" · :double_vertical_bar: paused (resumes at {run.current_tps or run.tps:,}/s)"
        else:
            left = max(rows - run.confirmed, 0) if rows and run.confirmed is not None else 0
            target = run.current_tps or run.tps
            speed = rate_now if rate_now else target
            shown = rate(rate_now) if rate_now else f"target {target:,}/s"  # no rate before a 2nd sample
            if rate_now and target != run.tps:
                shown += f" (set to {target:,}/s)"
            tail = f" · {shown}" + (f" · about {human_duration(left / speed)} left" if speed and left else "")
        text = f"{icon} {done}{tail}"
    if as_of is not None:
        text += f" · updated {clock_time(as_of, zone, seconds=True)}"
    return message(text, *sections(text))


def _report(run: RunOut, zone: tzinfo | None) -> list[str]:
    """The lines every ended run's final word and status share: times, counts, verdict, dead letters."""
    lines = [line for line in (times_line(run, zone),) if line]
    if run.snapshot is not None:  # the version the job and its reconcile read, and a repair reads again
        lines.append(f"It read {_source(run.source, run.snapshot)}; later commits are not in it.")
    elif run.listed_files is not None:
        read = _source(run.source, None, run.listed_files)
        lines.append(f"It read {read}; files written since are not in it.")
    lines += [report_line(run), *verdict_lines(run.id, run.reconcile)]
    if run.delivery == "transactional":
        lines.append(TRANSACTIONAL_NOTE)
    if aside := set_aside(run):
        lines.append(aside)
    return lines


def final_reply(run: RunOut, *, zone: tzinfo | None = None) -> Message:
    """The last word in the thread, to the requester: what the broker confirmed and what was measured,
    or why it stopped, what is on the topic anyway, and what to do; times in `zone` with UTC beside."""
    confirmed, rows, who = f"*{count(run.confirmed)}*", count(run.rows), mention(run.requester)
    if run.state == "succeeded":
        lines = [
            f":white_check_mark: *Done,* {who}. The broker confirmed {confirmed} events "
            f"({_out_of(run)}) into `{escape(run.topic)}`.",
            f"Achieved {rate(run.achieved_tps)} between the first and the last confirmed delivery "
            f"(asked {rate_label(run.tps, run.ramp_s, run.max_mb, run.speed)}); "
            f"the run took {human_duration(run.duration_s)}, start-up included.",
        ]
    elif run.state == "cancelled":
        lines = [
            f":no_entry_sign: *Cancelled,* {who}. {confirmed} of {rows} events were confirmed before it "
            f"stopped; they stay in `{escape(run.topic)}`.",
            on_topic_line(run),
            f"*Next step:* {next_step(run)}",
        ]
    else:
        reason = fit(escape(run.failure_reason or "no reason was reported"), 1500)
        lines = [
            f"{run_icon(run.state)} *{escape(run.state.capitalize())},* {who}, after {confirmed} of {rows} "
            "events were confirmed by its finished tasks.",
            on_topic_line(run),
            f"*Reason:* {reason}",
            f"*Next step:* {next_step(run)}",
        ]
    text = "\n".join([*lines, *_report(run, zone)])
    return message(text, *sections(text))


def reconcile_reply(run: RunOut, *, zone: tzinfo | None = None) -> Message:
    """An on-demand reconcile's verdict, in the run's thread."""
    at = run.reconcile.at if run.reconcile is not None else None
    repair = run.reconcile.repaired_by if run.reconcile is not None else None
    after = f"after repair `{escape(repair)}`" if repair else "asked after the run"
    head = f":mag: *Reconcile of `{escape(run.id)}`* ({when(at, zone=zone)}), {after}:"
    text = "\n".join([head, *verdict_lines(run.id, run.reconcile)])
    return message(text, *sections(text))


# --- the bot's answers about runs -----------------------------------------------------------------------


def accepted(run: RunOut, *, created: bool, unreachable: str | None = None) -> Message:
    """The acknowledgement; `unreachable` is Slack's answer when the channel cannot be posted to
    (`not_in_channel`, `is_archived`...), so the person knows the thread comes to their DM."""
    if created:
        where = (
            f"I cannot post in this channel (Slack says `{escape(unreachable)}`), so progress follows in "
            "your direct messages with me, in the run's thread."
            if unreachable
            else "Progress follows in this channel, in the run's thread."
        )
        text = (
            f":rocket: Accepted as `{escape(run.id)}`: {count(run.rows)} rows of "
            f"{escape(run.source)} `{escape(run.window or '')}` → `{escape(run.topic)}` at {run.tps:,}/s. "
            + where
        )
    else:
        text = f":repeat: Already accepted as `{escape(run.id)}` ({escape(run.state)}); nothing new."
    return message(text, *sections(text))


def run_status(run: RunOut, *, zone: tzinfo | None = None) -> Message:
    """`/replay status`: the run's card and, once it ended, its report; a stopped run adds its reason,
    what reached the broker, and a next step with the window pinned. Times in `zone`, UTC beside."""
    card = run_parent(run)
    if run.state not in TERMINAL_RUN_STATES:
        return card
    lines = []
    if run.state in ("failed", "cancelled"):
        reason = fit(escape(run.failure_reason or "no reason was reported"), 1500)
        lines += [f"*Reason:* {reason}", on_topic_line(run), f"*Next step:* {next_step(run)}"]
    lines += _report(run, zone)
    return message(card.text, *card.blocks, *sections("\n".join(lines)))


def run_line(run: RunOut) -> str:
    line = (
        f"{run_icon(run.state)} `{escape(run.id)}` {escape(run.source)} `{escape(run.window or '')}` "
        f"→ `{escape(run.topic)}` · {count(run.confirmed)}/{count(run.rows)} · {mention(run.requester)}"
    )
    return clip(line, MAX_LINE)


def run_list(runs: Sequence[RunOut], title: str) -> Message:
    shown = [run_line(run) for run in runs[:MAX_LISTED_RUNS]]
    return listing("Runs", title, shown, len(runs))


def cancelling(run: RunOut) -> Message:
    return notice(f":octagonal_sign: Cancelling `{escape(run.id)}`; the final count follows in its thread.")


# --- plans and the live-topic confirmation ----------------------------------------------------------------


def _plan_fields(plan: PlanOut) -> dict[str, Any]:
    kept = _filter(plan.where) + _keys_file(plan.keys_file, plan.keys_count) + _fields(plan.fields)
    return fields(
        [
            ("Source", _source(plan.source, plan.snapshot, plan.listed_files)),
            ("Window", f"`{escape(plan.window)}`" + ("" if " tz=" in plan.window else " (UTC)") + kept),
            ("Rows", count(plan.rows) + _erasures(plan)),
            ("Target topic", _topic(plan.topic, plan.delivery, plan.partitions, cluster=plan.cluster)),
            (
                "Rate",
                f"{rate_label(plan.tps, plan.ramp_s, plan.max_mb, plan.speed)} on {plan.workers} workers",
            ),
            ("ETA", eta_split(plan)),
        ]
    )


def _warmth(warm: bool | None) -> str:
    """` (warm)`, ` (cold)`, or nothing when the launcher cannot tell."""
    return "" if warm is None else " (warm)" if warm else " (cold)"


def eta_split(plan: PlanOut) -> str:
    """`about 25s: ~20s to start, ~5.0s to publish`: the total, and where it goes (a wait for a
    launcher slot first, when the runs ahead hold them)."""
    text = f"about {human_duration(plan.eta_s)}"
    if plan.eta_startup_s is None or plan.eta_publish_s is None:
        return text
    parts = [
        f"~{human_duration(plan.eta_startup_s)} to start{_warmth(plan.warm)}",
        f"~{human_duration(plan.eta_publish_s)} to publish",
    ]
    if plan.eta_queue_s >= 1:  # the wait first: it comes first
        ahead = f"{plan.runs_ahead} run{'s' if plan.runs_ahead != 1 else ''}"
        parts.insert(0, f"~{human_duration(plan.eta_queue_s)} waiting for {ahead} ahead")
    if plan.eta_finish_s is not None and plan.eta_finish_s >= 1:
        parts.append(f"~{human_duration(plan.eta_finish_s)} to finish")
    return f"{text}: {', '.join(parts)}"


def plan_summary(plan: PlanOut) -> Message:
    text = (
        f"Plan: {count(plan.rows)} rows of {escape(plan.source)} {escape(plan.window)} "
        f"→ {escape(plan.topic)} at {plan.tps:,}/s, {eta_split(plan)}"
    )
    hint = rewind_hint(plan.rewind_instead)  # the window is still on the live topic
    extra = [section(hint)] if hint else []
    if plan.speed is not None:
        extra.insert(0, section(f"Shape: {shape_note(plan.speed, plan.tps, plan.peak_tps, plan.slid_s)}"))
    return message(text, header("Dry run: nothing was sent"), _plan_fields(plan), *extra)


def overridden(plan: PlanOut) -> str:
    """The runs a `force=yes` live replay publishes over, one per line; empty when there are none."""
    return "\n".join(
        f":heavy_exclamation_mark: `force=yes` overrides `{escape(o.run_id)}` ({escape(o.window)}, "
        f"requested by {mention(o.requester)}, {escape(o.state)}): its window is published again."
        for o in plan.overlapping
    )


def live_confirmation(plan: PlanOut, *, value: str, expires_in_s: float) -> Message:
    """Buttons before publishing into a live topic; both carry the same request in `value`."""
    warning = (
        f":warning: This publishes into the *live* topic `{escape(plan.topic)}`: every consumer of "
        f"it will see these {count(plan.rows)} events again. Confirm within "
        f"{human_duration(expires_in_s)}."
    )
    label = "Publish to live topic"
    if plan.live_approvals > 1:
        warning += " Confirming asks a second owner of the source to approve it, in this channel."
        label = "Ask an owner to approve"
    if overrides := overridden(plan):
        warning += "\n" + overrides
    actions = buttons(
        "replay_live",
        (CONFIRM_ACTION, label, value, "danger"),
        (CANCEL_ACTION, "Cancel", value, None),
    )
    return message(warning, section(warning), _plan_fields(plan), actions)


def live_approval_request(plan: PlanOut, *, requester: str, value: str, expires_in_s: float) -> Message:
    """Posted in the channel, so the incident room sees it: another owner's click launches the replay."""
    text = (
        f":raised_hand: {mention(requester)} asks to publish {count(plan.rows)} events of "
        f"{escape(plan.source)} `{escape(plan.window)}` into the *live* topic `{escape(plan.topic)}`. "
        f"Another owner of {escape(plan.source)} must approve within {human_duration(expires_in_s)}."
    )
    if overrides := overridden(plan):
        text += "\n" + overrides
    actions = buttons("replay_live_approval", (APPROVE_ACTION, "Approve and publish", value, "danger"))
    return message(text, section(text), _plan_fields(plan), actions)
