"""`SlackNotifier` against the local Slack stand-in: one thread per run (parent card, one progress
message edited in place, the final reply to the requester, the rate chart), the parent edited at each
state change, a DM when the channel cannot be posted to, 429s retried until a message or an edit
lands once, and Slack's refusals translated to one error type."""

from __future__ import annotations

import itertools
import socket
from datetime import timedelta
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.http_retry import RateLimitErrorRetryHandler
from structlog.testing import capture_logs

from daemon.adapters.log_notifier import LogNotifier
from daemon.adapters.slack_notifier import SlackDeliveryError, SlackNotifier
from daemon.contract.models import RateSeriesOut, ReconcileOut, RunOut
from daemon.slack.web_client import make_web_client
from daemon.usecases.ports import RunThread
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


def _started(notifier: SlackNotifier, run: RunOut = RUN) -> RunThread:
    thread = notifier.run_started(run)
    assert thread is not None  # the parent was posted
    return thread


def _in_thread(thread: RunThread, **changes: object) -> RunOut:
    """The run as the watcher hands it over once it stored where its thread is."""
    where = {"slack_channel": thread.channel, "slack_ts": thread.ts, "slack_progress_ts": thread.progress_ts}
    return _run(**where, **changes)


SERIES = RateSeriesOut(start=CREATED, counts=[100] * 3 + [250] + [90] * 2, target_tps=100)


def test_run_started_posts_the_parent_and_one_progress_message_in_the_runs_channel(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    thread = _started(notifier)

    parent, progress = slack_standin.messages(CHANNEL)
    assert (thread.channel, thread.ts, thread.progress_ts) == (CHANNEL, parent.ts, progress.ts)
    assert (parent.thread_ts, progress.thread_ts) == (None, parent.ts)
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
    assert progress.text.startswith(":hourglass_flowing_sand: *0* of 600 confirmed (0%)")


def test_progress_edits_the_one_progress_message_in_place(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    thread = _started(notifier, _run(state="submitted"))

    for confirmed, rate in ((150, 95.0), (300, 98.0), (450, 101.0)):
        notifier.run_progress(_in_thread(thread, confirmed=confirmed), rate=rate)

    [_, progress] = slack_standin.thread(CHANNEL, thread.ts)
    assert progress.ts == thread.progress_ts
    assert progress.edits == 3
    assert progress.text.startswith(":hourglass_flowing_sand: *450* of 600 confirmed (75%) · 101/s · about")
    assert " · updated " in progress.text and progress.text.endswith(" UTC")
    assert len(slack_standin.calls("chat.postMessage")) == 2  # the parent and the progress message, once


def test_a_state_change_edits_the_parent(notifier: SlackNotifier, slack_standin: SlackStandin) -> None:
    thread = _started(notifier, _run(state="submitted"))

    notifier.run_state_changed(_in_thread(thread, state="running"))

    parent = slack_standin.thread(CHANNEL, thread.ts)[0]
    assert parent.edits == 1
    assert ":arrow_forward: running" in _all_text(parent.blocks)
    assert "submitted" not in _all_text(parent.blocks)


def test_the_end_replies_to_the_requester_edits_progress_and_parent_and_uploads_the_chart(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    thread = _started(notifier)
    notifier.run_progress(_in_thread(thread, confirmed=300), rate=98.0)
    reconcile = ReconcileOut(at=CREATED, selected=600, found=600, missing=0, unexpected=0, duplicates=0)
    final = _ended(
        6.1,
        **_in_thread(thread).model_dump(include={"slack_channel", "slack_ts", "slack_progress_ts"}),
        state="succeeded",
        rows_selected=600,
        confirmed=600,
        achieved_tps=99.5,
        duplicates=0,
        reconcile=reconcile,
    )

    notifier.run_finished(final, SERIES)

    parent, progress, report, chart = slack_standin.thread(CHANNEL, thread.ts)
    assert report.text.startswith(":white_check_mark: *Done,* <@U0ALICE>. The broker confirmed *600* events")
    assert "Achieved 99.5/s between the first and the last confirmed delivery (asked 100/s)" in report.text
    assert "*Reconcile:* clean: every one of 600 event ids exactly once" in report.text
    assert progress.text.startswith(":white_check_mark: *600* of 600 confirmed (100%) · succeeded")
    assert (progress.edits, parent.edits) == (2, 1)
    assert "succeeded" in _all_text(parent.blocks)
    [shared] = chart.files
    assert (chart.thread_ts, shared["name"]) == (thread.ts, "r-0123456789ab-rate.png")
    png = slack_standin.file_bytes(shared["id"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    assert [c.method for c in slack_standin.calls()] == [
        "chat.postMessage",  # parent
        "users.info",  # the requester's time zone, asked once and kept
        "chat.postMessage",  # progress
        "chat.update",  # progress
        "chat.postMessage",  # final reply
        "chat.update",  # progress, final state
        "chat.update",  # parent
        "files.getUploadURLExternal",
        "upload",
        "files.completeUploadExternal",
    ]


def test_a_failed_run_reports_the_reason_what_is_on_the_topic_and_a_next_step(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    thread = _started(notifier)
    failed = _in_thread(
        thread,
        state="failed",
        confirmed=120,
        on_topic_at_least=180,
        failure_reason="delivery failed: broker <down> & out",
    )

    notifier.run_finished(failed)

    report = slack_standin.thread(CHANNEL, thread.ts)[-1]
    assert "<@U0ALICE>, after *120* of 600 events were confirmed" in report.text
    assert "At least *180* are on the topic" in report.text
    assert "*Reason:* delivery failed: broker &lt;down&gt; &amp; out" in report.text
    assert "*Next step:*" in report.text
    assert slack_standin.files() == []  # no series, no chart


def test_an_on_demand_reconcile_replies_in_the_runs_thread(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    thread = _started(notifier)
    reconcile = ReconcileOut(
        at=CREATED, selected=600, found=599, missing=1, unexpected=0, duplicates=0, missing_sample=["e-42"]
    )

    notifier.run_reconciled(_in_thread(thread, state="succeeded", reconcile=reconcile))

    reply = slack_standin.thread(CHANNEL, thread.ts)[-1]
    assert reply.thread_ts == thread.ts
    assert "*Reconcile:* missing: 1 missing" in reply.text and "`e-42`" in reply.text


def test_a_429_is_retried_after_retry_after_and_the_message_arrives_once(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    slack_standin.fail_next("chat.postMessage", times=2, status=429)

    thread = _started(notifier)

    attempts = slack_standin.calls("chat.postMessage")
    assert [c.status for c in attempts] == [429, 429, 200, 200]
    assert all(later.at - earlier.at >= 1.0 for earlier, later in itertools.pairwise(attempts[:3]))
    assert [m.ts for m in slack_standin.messages(CHANNEL)] == [thread.ts, thread.progress_ts]


def test_a_429_on_a_progress_edit_is_retried_and_the_edit_lands_once(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    thread = _started(notifier)
    slack_standin.fail_next("chat.update", status=429)

    notifier.run_progress(_in_thread(thread, confirmed=300), rate=98.0)

    updates = slack_standin.calls("chat.update")
    assert [c.status for c in updates] == [429, 200]
    assert updates[1].at - updates[0].at >= 1.0
    progress = slack_standin.thread(CHANNEL, thread.ts)[1]
    assert (progress.edits, progress.text.startswith(":hourglass_flowing_sand: *300* of 600")) == (1, True)


@pytest.mark.parametrize(
    ("setup", "error"),
    [
        ({"member": False}, "not_in_channel"),
        ({"archived": True}, "is_archived"),
        ({"member": False, "private": True}, "channel_not_found"),
    ],
)
def test_a_channel_slack_refuses_sends_the_thread_to_the_requesters_dm(
    notifier: SlackNotifier, slack_standin: SlackStandin, setup: dict[str, bool], error: str
) -> None:
    slack_standin.set_channel(CHANNEL, **setup)

    thread = _started(notifier)
    first = _all_text(slack_standin.thread("D0ALICE", thread.ts)[0].blocks)
    notifier.run_progress(_in_thread(thread, confirmed=300), rate=98.0)
    notifier.run_finished(_in_thread(thread, state="succeeded", rows_selected=600, confirmed=600), SERIES)

    assert thread.channel == "D0ALICE"  # conversations.open with the requester
    assert f"I could not post in <#{CHANNEL}> (Slack said `{error}`)" in first
    assert slack_standin.messages(CHANNEL) == []
    parent, progress, report, chart = slack_standin.thread("D0ALICE", thread.ts)
    assert "This run's thread is in your direct messages with me." in _all_text(parent.blocks)  # edited
    assert progress.ts == thread.progress_ts and progress.edits == 2
    assert "<@U0ALICE>" in report.text
    assert chart.files[0]["name"] == "r-0123456789ab-rate.png"


def test_a_refused_channel_without_a_slack_requester_is_the_translated_error(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    slack_standin.set_channel(CHANNEL, member=False)

    with pytest.raises(SlackDeliveryError) as caught:
        notifier.run_started(_run(requester="alice"))  # a CLI user: there is no DM to fall back to

    assert (caught.value.method, caught.value.error) == ("chat.postMessage", "not_in_channel")
    assert slack_standin.calls("conversations.open") == []


def test_slack_refusing_a_message_is_one_translated_error_without_retries(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    slack_standin.fail_next("chat.postMessage", error="invalid_blocks")

    with pytest.raises(SlackDeliveryError) as caught:
        notifier.run_started(RUN)

    assert (caught.value.method, caught.value.error) == ("chat.postMessage", "invalid_blocks")
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
    notifier.run_state_changed(headless)
    notifier.run_progress(headless, rate=None)
    notifier.run_finished(_run(slack_channel=None, state="succeeded"), SERIES)
    notifier.run_reconciled(headless)
    assert slack_standin.calls() == []


def test_a_run_without_a_channel_goes_to_the_default_channel(slack_standin: SlackStandin) -> None:
    notifier = SlackNotifier(
        client=make_web_client(BOT_TOKEN, slack_standin.base_url), default_channel="C0PLATFORM"
    )

    thread = _started(notifier, _run(slack_channel=None))

    assert [m.ts for m in slack_standin.messages("C0PLATFORM")] == [thread.ts, thread.progress_ts]


def test_progress_without_a_progress_message_is_never_a_new_reply(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    notifier.run_progress(_run(confirmed=10), rate=None)
    notifier.run_progress(_run(confirmed=20, slack_ts="1714557600.000100"), rate=None)

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


def test_a_failed_edit_still_leaves_the_final_report_the_other_edit_and_the_chart(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    thread = _started(notifier)
    slack_standin.fail_next("chat.update", error="cant_update_message")  # the progress edit

    notifier.run_finished(_in_thread(thread, state="succeeded", rows_selected=600, confirmed=600), SERIES)

    parent, progress, report, chart = slack_standin.thread(CHANNEL, thread.ts)
    assert "The broker confirmed *600* events" in report.text
    assert (progress.edits, parent.edits) == (0, 1)
    assert len(chart.files) == 1


def test_a_final_reply_slack_refused_raises_and_nothing_after_it_was_sent(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    thread = _started(notifier)
    slack_standin.fail_next("chat.postMessage", 3, status=500)

    with pytest.raises(SlackDeliveryError):
        notifier.run_finished(_in_thread(thread, state="succeeded", rows_selected=600, confirmed=600), SERIES)

    assert len(slack_standin.thread(CHANNEL, thread.ts)) == 2  # the parent and its progress message only
    assert slack_standin.calls("chat.update") == []
    assert slack_standin.calls("files.getUploadURLExternal") == []


def test_without_slack_the_log_notifier_logs_the_honest_report_unknowns_as_none() -> None:
    notifier = LogNotifier()
    failed = _run(state="failed", confirmed=120, on_topic_at_least=None, failure_reason="boom")

    with capture_logs() as logs:
        assert notifier.run_started(RUN) is None
        notifier.run_state_changed(RUN)
        notifier.run_finished(failed, SERIES)
        notifier.run_reconciled(failed)

    assert [entry["event"] for entry in logs] == [
        "notify run started",
        "notify run state",
        "notify run finished",
        "notify run reconciled",
    ]
    finished = logs[2]
    assert (finished["duplicates"], finished["on_topic_at_least"], finished["series_seconds"]) == (0, None, 6)
    assert finished["reconcile"] == logs[3]["reconcile"] == "not reconciled: the run reported no reconcile"


def test_the_final_reply_is_reported_delivered_before_the_edits_and_the_chart(
    notifier: SlackNotifier, slack_standin: SlackStandin
) -> None:
    thread = _started(notifier)
    before = len(slack_standin.calls())
    seen_at_delivery: list[list[str]] = []

    notifier.run_finished(
        _in_thread(thread, state="succeeded", rows_selected=600, confirmed=600),
        SERIES,
        delivered=lambda: seen_at_delivery.append([c.method for c in slack_standin.calls()[before:]]),
    )

    assert seen_at_delivery == [["chat.postMessage"]]  # a crash after this point cannot repeat the reply
    assert "chat.update" in [c.method for c in slack_standin.calls()[before:]]
