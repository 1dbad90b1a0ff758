"""`SlackNotifier` against the local Slack stand-in: one thread per run, the parent edited at the end,
429s retried until the message arrives once, and Slack's refusals translated to one error type."""

from __future__ import annotations

import itertools
import socket
from datetime import timedelta
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.http_retry import RateLimitErrorRetryHandler

from daemon.adapters.slack_notifier import SlackDeliveryError, SlackNotifier
from daemon.contract.models import RunOut
from daemon.slack.web_client import make_web_client
from scripts.devtools.slack_standin import SlackStandin
from tests.fixtures.slack import BOT_TOKEN, CHANNEL, CREATED, wire_run

RUN = wire_run(started_at=CREATED)  # 600 rows planned at 100/s: a 6-second ETA


def _run(**changes: object) -> RunOut:
    return RunOut.model_validate({**RUN.model_dump(), **changes})


def _ended(seconds: float, **changes: object) -> RunOut:
    return _run(ended_at=CREATED + timedelta(seconds=seconds), **changes)


@pytest.fixture
def notifier(slack_standin: SlackStandin) -> SlackNotifier:
    return SlackNotifier(client=make_web_client(BOT_TOKEN, slack_standin.base_url))


def _all_text(blocks: list[dict[str, Any]]) -> str:
    return repr(blocks)


def test_run_started_posts_the_parent_in_the_runs_channel_and_returns_its_ts(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    ts = notifier.run_started(RUN)

    [parent] = slack_standin.messages(CHANNEL)
    assert parent.ts == ts
    assert parent.thread_ts is None
    for shown in (
        "orders",
        "2024-01-01..2024-01-02",
        "600",
        "replay.orders.r-0123456789ab",
        "100/s",
        "<@U0ALICE>",
    ):
        assert shown in _all_text(parent.blocks)
    assert "6.0s" in _all_text(parent.blocks)  # the ETA


def test_progress_and_the_final_report_are_replies_in_the_thread_and_the_parent_is_updated(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    ts = notifier.run_started(RUN)
    assert ts is not None  # the parent was posted
    notifier.run_progress(_run(slack_ts=ts, confirmed=300), rate=98.0)
    final = _ended(6.1, slack_ts=ts, state="succeeded", rows_selected=600, confirmed=600, achieved_tps=99.5)
    notifier.run_finished(final)

    parent, progress, report = slack_standin.thread(CHANNEL, ts)
    assert (progress.thread_ts, report.thread_ts) == (ts, ts)
    assert "300* of 600 confirmed (50%)" in progress.text
    assert "The broker confirmed *600* events" in report.text
    assert "Achieved 99.5/s (asked 100/s) in 6.1s" in report.text
    assert parent.edits == 1
    assert "succeeded" in _all_text(parent.blocks)
    assert [c.method for c in slack_standin.calls()] == [
        "chat.postMessage",
        "chat.postMessage",
        "chat.postMessage",
        "chat.update",
    ]


def test_a_failed_run_reports_the_reason_and_a_next_step(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    ts = notifier.run_started(RUN)
    assert ts is not None  # the parent was posted
    failed = _run(
        slack_ts=ts, state="failed", confirmed=120, failure_reason="delivery failed: broker <down> & out"
    )

    notifier.run_finished(failed)

    report = slack_standin.thread(CHANNEL, ts)[-1]
    assert "after *120* of 600 events" in report.text
    assert "*Reason:* delivery failed: broker &lt;down&gt; &amp; out" in report.text
    assert "*Next step:*" in report.text


def test_a_429_is_retried_after_retry_after_and_the_message_arrives_once(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    slack_standin.fail_next("chat.postMessage", times=2, status=429)

    ts = notifier.run_started(RUN)

    attempts = slack_standin.calls("chat.postMessage")
    assert [c.status for c in attempts] == [429, 429, 200]
    assert all(later.at - earlier.at >= 1.0 for earlier, later in itertools.pairwise(attempts))
    assert [m.ts for m in slack_standin.messages(CHANNEL)] == [ts]


def test_slack_refusing_a_channel_is_one_translated_error_without_retries(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    with pytest.raises(SlackDeliveryError) as caught:
        notifier.run_started(_run(slack_channel="C0GONE404"))

    assert (caught.value.method, caught.value.error) == ("chat.postMessage", "channel_not_found")
    assert len(slack_standin.calls("chat.postMessage")) == 1


def test_rate_limited_for_good_ends_in_the_translated_error(slack_standin: SlackStandin) -> None:
    client = WebClient(token=BOT_TOKEN, base_url=slack_standin.base_url)
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=1))
    notifier = SlackNotifier(client=client)

    with pytest.raises(SlackDeliveryError, match="ratelimited"):
        notifier.run_started(_run(slack_channel="C0BUSY429"))

    assert [c.status for c in slack_standin.calls("chat.postMessage")] == [429, 429]


def test_an_unreachable_slack_is_the_translated_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again on exit: nothing listens there
    notifier = SlackNotifier(client=make_web_client(BOT_TOKEN, f"http://127.0.0.1:{port}/api/"))

    with pytest.raises(SlackDeliveryError, match=r"chat\.postMessage"):
        notifier.run_started(RUN)


def test_a_run_without_a_channel_posts_nothing(notifier: SlackNotifier, slack_standin: SlackStandin) -> None:
    headless = _run(slack_channel=None)

    assert notifier.run_started(headless) is None
    notifier.run_progress(headless, rate=None)
    notifier.run_finished(_run(slack_channel=None, state="succeeded"))
    assert slack_standin.calls() == []


def test_a_run_without_a_channel_goes_to_the_default_channel(slack_standin: SlackStandin) -> None:
    notifier = SlackNotifier(
        client=make_web_client(BOT_TOKEN, slack_standin.base_url), default_channel="C0PLATFORM"
    )

    ts = notifier.run_started(_run(slack_channel=None))

    assert [m.ts for m in slack_standin.messages("C0PLATFORM")] == [ts]


def test_progress_without_a_thread_is_not_posted(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    notifier.run_progress(_run(confirmed=10), rate=None)

    assert slack_standin.calls() == []


def test_a_final_report_without_an_announcement_starts_its_own_thread(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    notifier.run_finished(_run(state="failed", failure_reason="could not launch the job: boom"))

    parent, report = slack_standin.messages(CHANNEL)
    assert report.thread_ts == parent.ts
    assert "failed" in _all_text(parent.blocks)
    assert "could not launch the job" in report.text
    assert slack_standin.calls("chat.update") == []


def test_a_failed_parent_update_still_leaves_the_final_report(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    ts = notifier.run_started(RUN)
    assert ts is not None  # the parent was posted
    slack_standin.fail_next("chat.update", error="cant_update_message")

    with pytest.raises(SlackDeliveryError, match="cant_update_message"):
        notifier.run_finished(_run(slack_ts=ts, state="succeeded", rows_selected=600, confirmed=600))

    assert "The broker confirmed *600* events" in slack_standin.thread(CHANNEL, ts)[-1].text
