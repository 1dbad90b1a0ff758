"""`SlackNotifier`: a run's story as one Slack thread (announcement, progress, final word, chart).

The parent card goes to the channel the command came from, with one progress message as its first
reply; both are edited in place (`chat.update`) as the run moves, so a long replay stays three
messages and a chart, not hundreds. The final reply mentions the requester with the honest report,
and the rate chart (`files_upload_v2`) follows it in the thread. When Slack will not take the run's
channel (the bot is not in it, or it is archived) the thread goes to the requester's DM, and its parent
says why. At the end each step (reply, progress edit, parent edit, chart) is tried even when an
earlier one failed; the first failure is raised afterwards. A scheduled pipeline gets
one thread too: its summary is the parent and each reported run is one line in it (the parent stays
the pipeline's, never edited by a run). Idle-pipeline questions and farewells go to each owner by DM;
a DM Slack will not deliver (deactivated user, bot user, DMs closed...) goes to the platform channel
instead, mentioning the owner, so the question is never silently lost. Rendering is `daemon.slack`
(from the wire models: a run's `RunOut` itself, a pipeline through `PipelineView`); delivery is an
injected `slack_sdk.WebClient`, given slack_sdk's retry handlers (`daemon.slack.web_client`) so a 429
waits for `Retry-After` and the message arrives once. Every `SlackApiError` is translated to
`SlackDeliveryError` in `_translated`, the one place this adapter touches the Web API.

ReplayError
└── SlackDeliveryError   Slack refused or could not take a message (method, Slack's error code)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import structlog
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web import SlackResponse

from daemon.config.settings import Settings
from daemon.contract.models import IdlePrompt, PipelineOut, RateSeriesOut, RunOut
from daemon.core.errors import ReplayError
from daemon.slack import idle_messages
from daemon.slack.blocks import Message, is_user_id
from daemon.slack.control_messages import rate_changed_reply
from daemon.slack.drain_messages import drain_message, drain_outcome
from daemon.slack.pipeline_messages import pipeline_run_line, pipeline_summary
from daemon.slack.rate_chart import render_run_chart
from daemon.slack.run_messages import final_reply, progress_reply, reconcile_reply, run_parent
from daemon.slack.run_report import chart_title
from daemon.slack.topic_messages import topic_deleted, topic_expiring
from daemon.slack.user_zones import UserZones
from daemon.slack.views import PipelineView
from daemon.slack.web_client import make_web_client, with_retries
from daemon.usecases.ports import Notifier, RunThread

log = structlog.get_logger(__name__)
T = TypeVar("T")

# Slack's answers that mean "the bot cannot post in this channel": the run's thread goes to a DM.
UNREACHABLE_CHANNEL = frozenset({"not_in_channel", "channel_not_found", "is_archived"})

# Slack's answers that mean "this person cannot get a DM from us": retrying will not help, a channel will.
UNDELIVERABLE_DM = frozenset(
    {
        "user_not_found",
        "cannot_dm_bot",
        "user_disabled",
        "account_inactive",
        "messages_tab_disabled",
        "not_allowed",
        "channel_not_found",
        "is_archived",
    }
)


class SlackDeliveryError(ReplayError):
    """A Web API call failed for good (after slack_sdk's retries)."""

    def __init__(self, method: str, error: str) -> None:
        super().__init__(f"Slack {method} failed: {error}")
        self.method, self.error = method, error


class SlackNotifier(Notifier):
    def __init__(
        self, *, client: WebClient, default_channel: str | None = None, pages_url: str | None = None
    ) -> None:
        """`default_channel` (the platform channel) takes runs that came without one (e.g. from the
        `replay` CLI) and the owner questions a DM could not deliver; `pages_url`: where a run card's
        link to the run's page points."""
        self._client = with_retries(client)
        self._default_channel = default_channel
        self._pages_url = pages_url.rstrip("/") if pages_url else None
        self._zones = UserZones(self._client)  # the requester's zone: times shown in it, UTC beside

    def _page(self, run_id: str) -> str | None:
        """The run's page: the link itself signs nobody in (the card is seen by the channel)."""
        return f"{self._pages_url}/runs/{run_id}" if self._pages_url else None

    def _call(self, method: str, **params: Any) -> SlackResponse:
        return self._translated(method, lambda: self._client.api_call(method, json=params))

    @staticmethod
    def _translated(method: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except SlackApiError as exc:
            error = exc.response.get("error") if exc.response is not None else None
            status = exc.response.status_code if exc.response is not None else "?"
            raise SlackDeliveryError(method, str(error or f"HTTP {status}")) from exc
        except (SlackClientError, OSError) as exc:
            raise SlackDeliveryError(method, f"{type(exc).__name__}: {exc}") from exc

    def _channel(self, run: RunOut) -> str | None:
        return run.slack_channel or self._default_channel

    def _post(self, channel: str, message: Message, thread_ts: str | None = None) -> str:
        extra = {"thread_ts": thread_ts} if thread_ts else {}
        response = self._call(
            "chat.postMessage", channel=channel, unfurl_links=False, **message.payload(**extra)
        )
        return str(response["ts"])

    def _update(self, channel: str, ts: str, message: Message) -> None:
        self._call("chat.update", channel=channel, ts=ts, **message.payload())

    def _open_thread(self, run: RunOut, channel: str) -> tuple[str, str]:
        """Post the parent card in `channel`, or in the requester's DM when Slack refuses the channel;
        returns (channel, ts) of where it went."""
        try:
            return channel, self._post(channel, run_parent(run, page_url=self._page(run.id)))
        except SlackDeliveryError as exc:
            if exc.error not in UNREACHABLE_CHANNEL or not is_user_id(run.requester):
                raise  # another failure, or a requester with no Slack DM (a CLI user name)
            log.warning("slack channel unreachable: the thread goes to a DM", run_id=run.id, error=exc.error)
            dm = str(self._call("conversations.open", users=run.requester)["channel"]["id"])
            moved = run.model_copy(update={"slack_channel": dm})
            return dm, self._post(
                dm, run_parent(moved, redirected=(channel, exc.error), page_url=self._page(moved.id))
            )

    def run_started(self, run: RunOut) -> RunThread | None:
        channel = self._channel(run)
        if channel is None:
            return None
        channel, ts = self._open_thread(run, channel)
        log.info("slack thread started", run_id=run.id, channel=channel, ts=ts)
        try:
            progress = progress_reply(run, as_of=datetime.now(UTC), zone=self._zones.zone(run.requester))
            progress_ts: str | None = self._post(channel, progress, thread_ts=ts)
        except SlackDeliveryError as exc:  # the thread stands; only its progress line is missing
            log.warning("slack progress message not posted", run_id=run.id, error=str(exc))
            progress_ts = None
        return RunThread(channel=channel, ts=ts, progress_ts=progress_ts)

    def run_state_changed(self, run: RunOut) -> None:
        channel = self._channel(run)
        if channel is None or run.slack_ts is None or run.pipeline_id is not None:
            return  # no card of its own to edit
        self._update(channel, run.slack_ts, run_parent(run, page_url=self._page(run.id)))

    def run_progress(self, run: RunOut, *, rate: float | None) -> None:
        """Edit the one progress message; never a new reply (without it, progress is not shown)."""
        channel = self._channel(run)
        if channel is None or run.slack_progress_ts is None:
            return
        zone = self._zones.zone(run.requester)
        reply = progress_reply(run, rate_now=rate, as_of=datetime.now(UTC), zone=zone)
        self._update(channel, run.slack_progress_ts, reply)

    def run_finished(
        self, run: RunOut, series: RateSeriesOut | None = None, delivered: Callable[[], None] | None = None
    ) -> None:
        """Final reply, then progress edit, parent edit, chart. Raises only when the final reply itself
        was not delivered (then nothing else was sent); a later step failing is logged, not raised.
        `delivered` is called the moment Slack took the final reply, before the slower steps."""
        done = delivered or (lambda: None)
        channel = self._channel(run)
        if channel is None:
            done()
            return
        as_of = datetime.now(UTC)
        if run.pipeline_id is not None:  # one line in the pipeline's thread; its parent is not the run's
            self._post(channel, pipeline_run_line(run), thread_ts=run.slack_ts)
            done()
            return
        thread_ts = run.slack_ts
        if thread_ts is None:  # the announcement never went out: post the final card as the parent
            channel, thread_ts = self._open_thread(run, channel)
            run = run.model_copy(update={"slack_channel": channel})
        # The final reply first, and alone: if it fails the caller sends the whole report again later,
        # so nothing after it may have gone out; once it is out, the rest is best effort.
        zone = self._zones.zone(run.requester)
        self._post(channel, final_reply(run, zone=zone), thread_ts=thread_ts)
        done()
        steps: list[Callable[[], object]] = []
        if run.slack_progress_ts is not None:
            progress_ts = run.slack_progress_ts
            final = progress_reply(run, as_of=as_of, zone=zone)
            steps.append(lambda: self._update(channel, progress_ts, final))
        if run.slack_ts is not None:
            card = run_parent(run, page_url=self._page(run.id))
            steps.append(lambda: self._update(channel, thread_ts, card))
        if series is not None:
            steps.append(lambda: self._upload_chart(run, series, channel, thread_ts))
        failures: list[SlackDeliveryError] = []
        for step in steps:
            try:
                step()
            except SlackDeliveryError as exc:
                failures.append(exc)
        if failures:
            log.warning("slack final report incomplete", run_id=run.id, errors=[str(f) for f in failures])

    def _upload_chart(self, run: RunOut, series: RateSeriesOut, channel: str, thread_ts: str) -> None:
        png = render_run_chart(run, series)
        self._translated(
            "files_upload_v2",
            lambda: self._client.files_upload_v2(
                channel=channel,
                thread_ts=thread_ts,
                file=png,
                filename=f"{run.id}-rate.png",
                title=f"{run.id}: events per second vs {series.target_tps:,}/s",
                alt_txt=chart_title(run.id, run.reconcile),
            ),
        )

    def run_reconciled(self, run: RunOut) -> None:
        """The verdict as a reply in the run's thread (in the channel when the run has no thread)."""
        channel = self._channel(run)
        if channel is None:
            return
        zone = self._zones.zone(run.requester)
        self._post(channel, reconcile_reply(run, zone=zone), thread_ts=run.slack_ts)

    def run_rate_changed(self, run: RunOut, *, actor: str, reason: str | None = None) -> None:
        """One line in the run's thread per change; a run without a thread has nowhere to say it."""
        channel = self._channel(run)
        if channel is None or run.slack_ts is None:
            return
        reply = rate_changed_reply(run, actor=actor, reason=reason, zone=self._zones.zone(run.requester))
        self._post(channel, reply, thread_ts=run.slack_ts)

    def watch_started(self, run: RunOut) -> str | None:
        channel = self._channel(run)
        if channel is None or run.slack_ts is None:
            return None
        return self._post(channel, drain_message(run), thread_ts=run.slack_ts)

    def watch_progress(self, run: RunOut, *, message_ts: str) -> None:
        channel = self._channel(run)
        if channel is not None:
            self._update(channel, message_ts, drain_message(run))

    def watch_concluded(self, run: RunOut, group: str) -> None:
        """In the run's thread (a pipeline run's: its pipeline's thread), or the channel without one."""
        channel = self._channel(run)
        if channel is not None:
            self._post(channel, drain_outcome(run, group), thread_ts=run.slack_ts)

    def topic_expiry(self, run: RunOut, *, deletes_at: datetime | None) -> str:
        """In the run's thread; a run with no channel at all goes to its requester's DM."""
        note = topic_expiring(run, deletes_at) if deletes_at is not None else topic_deleted(run)
        channel = self._channel(run)
        if channel is None:
            if not is_user_id(run.requester):
                raise SlackDeliveryError("chat.postMessage", f"no channel for run {run.id}")
            channel = str(self._call("conversations.open", users=run.requester)["channel"]["id"])
        self._post(channel, note, thread_ts=run.slack_ts)
        return channel

    # -- pipelines ----------------------------------------------------------------------------

    def pipeline_scheduled(self, pipeline: PipelineOut) -> str | None:
        """Post the pipeline's summary where it was scheduled; its ts is the thread runs reply in.

        A refused post is logged, not raised: the pipeline exists either way, and its creation must not
        look failed (a retry would schedule it twice). Its runs then post their lines in the channel.
        """
        if pipeline.slack_channel is None:
            return None
        view = PipelineView.of(pipeline)
        try:
            ts = self._post(pipeline.slack_channel, pipeline_summary(view))
        except SlackDeliveryError as exc:
            log.warning("slack pipeline summary not delivered", pipeline_id=pipeline.id, error=str(exc))
            return None
        log.info(
            "slack pipeline thread started", pipeline_id=pipeline.id, channel=pipeline.slack_channel, ts=ts
        )
        return ts

    def idle_prompt(self, prompt: IdlePrompt, owner: str) -> str:
        view = PipelineView.of(prompt.pipeline)
        return self._to_owner(
            owner,
            lambda mentioned: idle_messages.idle_prompt(
                view,
                idle_since=prompt.idle_since,
                deadline=prompt.deadline,
                keep_days=prompt.keep_days,
                owner=mentioned,
            ),
        )

    def pipeline_removed(self, pipeline: PipelineOut, owner: str, removed: list[str], reason: str) -> str:
        view = PipelineView.of(pipeline)
        return self._to_owner(
            owner,
            lambda mentioned: idle_messages.pipeline_removed(
                view, removed=removed, reason=reason, owner=mentioned
            ),
        )

    def _to_owner(self, owner: str, render: Callable[[str | None], Message]) -> str:
        """DM `owner`; if Slack cannot deliver it, the platform channel gets it with a mention.

        `render(None)` is the DM, `render(owner)` the channel copy. Returns the channel it went to.
        Transient failures (rate limits, network) are raised, so the caller's dedup retries later.
        """
        platform = self._default_channel
        try:
            channel = str(self._call("conversations.open", users=owner)["channel"]["id"])
            self._post(channel, render(None))
            return channel
        except SlackDeliveryError as exc:
            if exc.error not in UNDELIVERABLE_DM or platform is None:
                raise
            log.warning("slack DM undeliverable: using the platform channel", owner=owner, error=exc.error)
            self._post(platform, render(owner))
            return platform


def slack_notifier_from_settings(settings: Settings) -> SlackNotifier | None:
    """The daemon's notifier when a bot token is configured; None means 'use the log notifier'."""
    if settings.slack_bot_token is None:
        return None
    client = make_web_client(settings.slack_bot_token.get_secret_value(), settings.slack_api_url)
    return SlackNotifier(
        client=client,
        default_channel=settings.slack_platform_channel,
        pages_url=settings.pages_url or settings.daemon_url,
    )
