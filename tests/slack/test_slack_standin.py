"""The local Slack stand-in answers like Slack, records everything, and fails when told to."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.webhook import WebhookClient

from daemon.adapters.slack_notifier import SlackNotifier
from daemon.contract.models import RateSeriesOut
from daemon.slack.web_client import make_web_client
from scripts.devtools.slack_standin import SlackStandin
from tests.fixtures.slack import BOT_TOKEN, CHANNEL, CREATED, wire_run


@pytest.fixture
def client(slack_standin: SlackStandin) -> WebClient:
    return WebClient(token=BOT_TOKEN, base_url=slack_standin.base_url, retry_handlers=[])


def test_post_message_returns_realistic_ids_and_is_recorded(
    client: WebClient, slack_standin: SlackStandin
) -> None:
    first = client.chat_postMessage(channel=CHANNEL, text="one")
    second = client.chat_postMessage(channel=CHANNEL, text="two", thread_ts=first["ts"])

    assert first["channel"] == CHANNEL
    assert float(second["ts"]) > float(first["ts"])
    assert [(c.method, c.params["text"]) for c in slack_standin.calls()] == [
        ("chat.postMessage", "one"),
        ("chat.postMessage", "two"),
    ]
    assert [m.text for m in slack_standin.thread(CHANNEL, first["ts"])] == ["one", "two"]


def test_update_of_an_unknown_message_is_message_not_found(client: WebClient) -> None:
    with pytest.raises(SlackApiError) as caught:
        client.chat_update(channel=CHANNEL, ts="1.000001", text="x")

    assert caught.value.response["error"] == "message_not_found"


def test_ephemeral_dm_and_auth_methods_answer(client: WebClient) -> None:
    assert client.auth_test()["bot_id"]
    assert client.chat_postEphemeral(channel=CHANNEL, user="U0ALICE", text="psst")["message_ts"]
    assert client.conversations_open(users="U0ALICE")["channel"]["id"].startswith("D")


def test_a_call_without_a_token_is_not_authed(slack_standin: SlackStandin) -> None:
    with pytest.raises(SlackApiError, match="not_authed"):
        WebClient(base_url=slack_standin.base_url).chat_postMessage(channel=CHANNEL, text="x")


def test_a_token_ending_in_429_is_rate_limited_with_retry_after(slack_standin: SlackStandin) -> None:
    client = WebClient(token="xoxb-busy-429", base_url=slack_standin.base_url, retry_handlers=[])

    with pytest.raises(SlackApiError) as caught:
        client.chat_postMessage(channel=CHANNEL, text="x")

    assert (caught.value.response.status_code, caught.value.response.headers["Retry-After"]) == (429, "1")


def test_planned_failures_are_used_once_each(client: WebClient, slack_standin: SlackStandin) -> None:
    slack_standin.fail_next("chat.postMessage", error="channel_not_found")

    with pytest.raises(SlackApiError, match="channel_not_found"):
        client.chat_postMessage(channel=CHANNEL, text="x")
    assert client.chat_postMessage(channel=CHANNEL, text="x")["ok"]


def test_response_urls_answer_ok_and_keep_what_was_posted(slack_standin: SlackStandin) -> None:
    response = WebhookClient(slack_standin.response_url("cmd-1")).send(text="hi", response_type="ephemeral")

    assert (response.status_code, response.body) == (200, "ok")
    assert slack_standin.responses("cmd-1") == [{"text": "hi", "response_type": "ephemeral"}]


def test_render_thread_reads_like_slack(slack_standin: SlackStandin) -> None:
    notifier = SlackNotifier(client=make_web_client(BOT_TOKEN, slack_standin.base_url))
    run = wire_run(window="2024-01-01", rows_planned=300)
    thread = notifier.run_started(run)
    assert thread is not None
    where = {"slack_ts": thread.ts, "slack_progress_ts": thread.progress_ts}
    notifier.run_progress(run.model_copy(update={**where, "confirmed": 150}), rate=100.0)
    series = RateSeriesOut(start=CREATED, counts=[100, 100, 100], target_tps=100)
    done = run.model_copy(update={**where, "state": "succeeded", "confirmed": 300, "rows_selected": 300})
    notifier.run_finished(done, series)

    text = slack_standin.render_thread(CHANNEL, thread.ts)

    lines = text.splitlines()
    assert lines[0].startswith(f"#{CHANNEL}  replay-bot  ") and lines[0].endswith(" (edited)")
    assert "  REPLAY R-0123456789AB · ORDERS · SUCCEEDED" in lines
    assert "  Requested by: @U0ALICE" in lines
    replies = [line for line in lines if line.startswith("  ↳ replay-bot")]
    assert len(replies) == 3 and replies[0].endswith(" (edited)")  # progress, final word, chart
    assert any(line.startswith("      ✅ 300 of 300 confirmed (100%) · succeeded") for line in lines)
    assert any(line.startswith("      ✅ Done, @U0ALICE.") for line in lines)
    [file] = slack_standin.files(CHANNEL)
    assert (
        f"      📎 {file.title} (r-0123456789ab-rate.png) {slack_standin.url}/_standin/files/{file.id}"
        in lines
    )
    assert httpx.get(f"{slack_standin.url}/_standin/threads").text == text


def test_progress_renders_as_one_line_edited_in_place(slack_standin: SlackStandin) -> None:
    notifier = SlackNotifier(client=make_web_client(BOT_TOKEN, slack_standin.base_url))
    run = wire_run(window="2024-01-01", rows_planned=300)
    thread = notifier.run_started(run)
    assert thread is not None
    where = {"slack_ts": thread.ts, "slack_progress_ts": thread.progress_ts}
    notifier.run_progress(run.model_copy(update={**where, "confirmed": 150}), rate=100.0)

    lines = slack_standin.render_thread(CHANNEL, thread.ts).splitlines()

    [progress] = [line for line in lines if line.startswith("      ⏳")]
    assert progress.startswith("      ⏳ 150 of 300 confirmed (50%) · 100/s · about 1.5s left · updated ")


# --- edits, files, channels ------------------------------------------------------------------------------


def test_update_edits_the_stored_message_in_place(client: WebClient, slack_standin: SlackStandin) -> None:
    posted = client.chat_postMessage(channel=CHANNEL, text="one")

    answer = client.chat_update(channel=CHANNEL, ts=posted["ts"], text="two")

    [message] = slack_standin.messages(CHANNEL)
    assert (answer["ts"], message.text, message.edits) == (posted["ts"], "two", 1)


def test_files_upload_v2_shares_the_bytes_into_the_thread(
    client: WebClient, slack_standin: SlackStandin
) -> None:
    parent = client.chat_postMessage(channel=CHANNEL, text="parent")
    data = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4

    answer = client.files_upload_v2(
        channel=CHANNEL, thread_ts=parent["ts"], file=data, filename="chart.png", title="The chart"
    )

    [stored] = slack_standin.files(CHANNEL)
    assert answer["file"]["id"] == stored.id
    assert (stored.name, stored.title, stored.thread_ts) == ("chart.png", "The chart", parent["ts"])
    assert slack_standin.file_bytes(stored.id) == data
    assert httpx.get(f"{slack_standin.url}/_standin/files/{stored.id}").content == data
    [_, shared] = slack_standin.thread(CHANNEL, parent["ts"])
    assert [f["id"] for f in shared.files] == [stored.id]
    assert [c.method for c in slack_standin.calls()][1:] == [
        "files.getUploadURLExternal",
        "upload",
        "files.completeUploadExternal",
    ]


def test_completing_an_upload_that_never_sent_its_bytes_is_file_not_found(client: WebClient) -> None:
    announced = client.files_getUploadURLExternal(filename="chart.png", length=10)

    with pytest.raises(SlackApiError, match="file_not_found"):
        client.files_completeUploadExternal(files=[{"id": announced["file_id"]}], channel_id=CHANNEL)


@pytest.mark.parametrize(
    ("setup", "error"),
    [
        ({"member": False}, "not_in_channel"),
        ({"archived": True}, "is_archived"),
        ({"member": False, "private": True}, "channel_not_found"),
    ],
)
def test_a_channel_the_bot_cannot_post_in_answers_like_slack(
    client: WebClient, slack_standin: SlackStandin, setup: dict[str, bool], error: str
) -> None:
    slack_standin.set_channel(CHANNEL, **setup)

    with pytest.raises(SlackApiError) as caught:
        client.chat_postMessage(channel=CHANNEL, text="x")

    assert caught.value.response["error"] == error
    assert slack_standin.messages() == []


def test_conversations_info_describes_the_channel_as_set_up(
    client: WebClient, slack_standin: SlackStandin
) -> None:
    slack_standin.set_channel("C0OLD", archived=True)
    slack_standin.set_channel("G0SECRET", member=False, private=True)

    old = client.conversations_info(channel="C0OLD")["channel"]
    plain = client.conversations_info(channel=CHANNEL)["channel"]

    assert (old["is_archived"], old["is_member"]) == (True, True)
    assert (plain["is_archived"], plain["is_member"], plain["is_private"]) == (False, True, False)
    with pytest.raises(SlackApiError, match="channel_not_found"):
        client.conversations_info(channel="G0SECRET")


def test_the_module_runs_as_a_server_for_the_demo() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "scripts.devtools.slack_standin", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        base_url = line.split("web api ")[1].split(" ")[0]
        client = WebClient(token=BOT_TOKEN, base_url=base_url)
        assert client.chat_postMessage(channel=CHANNEL, text="from the demo")["ok"]
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert process.returncode == 0
