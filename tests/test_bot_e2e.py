"""End to end: signed slash commands to the bot, the real Replay Service (SQLite, local Spark, the real
broker) and the local Slack stand-in, which receives the bot's replies and the daemon's thread."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
import yaml

from daemon.contract.client import DaemonClient
from daemon.contract.models import ReplayBody, RunOut
from daemon.slack.run_messages import CONFIRM_ACTION
from scripts.devtools.slack_standin import SlackStandin
from scripts.devtools.thread_text import Posted
from tests.fixtures.daemon import OWNER, STRANGER, DaemonProcess
from tests.fixtures.kafka import topic_record_count
from tests.fixtures.slack import CHANNEL, BotUnderTest

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

TERMINAL = {"succeeded", "failed", "cancelled"}
RUN_TIMEOUT_S = 240.0


def _run_ids(client: DaemonClient) -> set[str]:
    return {run.id for run in client.list_replays(OWNER, limit=200).runs}


def _wait_for_state(client: DaemonClient, run_id: str) -> RunOut:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        run = client.get_replay(OWNER, run_id)
        if run.state in TERMINAL:
            return run
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not end in {RUN_TIMEOUT_S}s: {run}")


def _accepted_run_id(bot: BotUnderTest, key: str) -> str:
    [reply] = bot.replies(key, timeout_s=60)
    found = re.search(r"Accepted as `(r-[0-9a-f]{12})`", reply["text"])
    assert found, reply["text"]
    return found[1]


def _thread_of(slack: SlackStandin, run_id: str) -> list[Posted]:
    parents = [m for m in slack.messages(CHANNEL) if m.thread_ts is None and run_id in m.text]
    return slack.thread(CHANNEL, parents[0].ts) if parents else []


def test_a_slash_command_becomes_a_thread_with_progress_and_the_broker_confirmed_count(
    bot: BotUnderTest, slack: SlackStandin, daemon_client: DaemonClient, kafka_bootstrap: str
) -> None:
    result = bot.slash("orders 2024-01-02..2024-01-03 tps=60", user=OWNER)  # 600 rows: ~10 s of sending
    run_id = _accepted_run_id(bot, result.key)

    run = _wait_for_state(daemon_client, run_id)
    assert run.state == "succeeded", run.failure_reason
    thread = slack.wait_until(
        lambda: (t := _thread_of(slack, run_id)) and t[0].edits and len(t) >= 2 and t,
        timeout_s=30,
        what=f"the final reply and parent update of {run_id}",
    )

    print(slack.render_thread(CHANNEL, thread[0].ts))
    parent, *progress, final = thread
    assert "succeeded" in repr(parent.blocks) and parent.edits == 1
    assert len(progress) >= 1
    assert all("confirmed (" in reply.text for reply in progress)
    report = re.search(r"The broker confirmed \*([\d,]+)\* events", final.text)
    assert report is not None, final.text
    confirmed = int(report[1].replace(",", ""))
    assert confirmed == topic_record_count(kafka_bootstrap, run.topic) == run.confirmed == 600


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("ordres 2024-01-02", "unknown source 'ordres'"),
        ("orders 2024-01-07..2024-01-01", "`2024-01-07..2024-01-01`: window ends before it starts"),
        ("orders 2024-01-02 tps=0", "`tps=0`: must be at least 1"),
        ("orders 2024-01-02 tps=abc", "`tps=abc`: 'abc' is not a number"),
        ("orders 2024-01-02 speed=5", "`speed=5`: unknown option 'speed'"),
        ("", "no command given"),
        ("orders 2024-01-02 \u202etps=5", "U+202E"),
        ("orders 2023-01-01", "no rows of 'orders' in 2023-01-01"),
    ],
)
def test_bad_input_gets_an_ephemeral_error_and_creates_no_run(
    bot: BotUnderTest, daemon_client: DaemonClient, text: str, shown: str
) -> None:
    before = _run_ids(daemon_client)

    result = bot.slash(text, user=OWNER)

    ack = result.ack.get("text", "")
    if shown not in ack:  # only the daemon knows its catalog and its table: answered after the ack
        [reply] = bot.replies(result.key, timeout_s=60)
        assert reply["response_type"] == "ephemeral"
        ack = reply["text"]
    assert shown in ack
    assert "Usage:" in ack
    assert _run_ids(daemon_client) == before


def test_publishing_to_the_live_topic_waits_for_the_requesters_click_and_a_double_click_launches_once(
    bot: BotUnderTest, daemon_client: DaemonClient, slack_daemon: DaemonProcess, kafka_bootstrap: str
) -> None:
    catalog = yaml.safe_load(Path(slack_daemon.env["REPLAY_CATALOG_PATH"]).read_text())
    live_topic = catalog["sources"]["orders"]["live_topic"]  # created by `running_daemon`
    live_before = topic_record_count(kafka_bootstrap, live_topic)
    before = _run_ids(daemon_client)

    asked = bot.slash("orders 2024-01-04 tps=5000 topic=live", user=OWNER)
    [question] = bot.replies(asked.key, timeout_s=60)
    [actions] = [block for block in question["blocks"] if block["type"] == "actions"]
    value = next(b["value"] for b in actions["elements"] if b["action_id"] == CONFIRM_ACTION)
    assert live_topic in question["text"]
    assert _run_ids(daemon_client) == before  # nothing launched before the button

    _, refused = bot.click(CONFIRM_ACTION, value, user=STRANGER)
    assert "Only <@U0OWNER1> can answer" in bot.replies(refused)[0]["text"]
    assert _run_ids(daemon_client) == before

    keys: list[str] = []
    clicks = [
        threading.Thread(target=lambda: keys.append(bot.click(CONFIRM_ACTION, value, user=OWNER)[1]))
        for _ in range(2)
    ]
    for click in clicks:
        click.start()
    for click in clicks:
        click.join()
    outcomes = [bot.replies(key, timeout_s=60)[0]["text"] for key in keys]

    [run_id] = _run_ids(daemon_client) - before
    run = _wait_for_state(daemon_client, run_id)
    assert (run.state, run.topic) == ("succeeded", live_topic), run.failure_reason
    assert topic_record_count(kafka_bootstrap, live_topic) - live_before == run.confirmed == 300
    assert sum("Accepted as" in text for text in outcomes) == 1, outcomes
    assert sum("started nothing new" in text for text in outcomes) == 1, outcomes


def test_cancelling_someone_elses_run_is_refused_by_the_daemon_ephemerally(
    bot: BotUnderTest, daemon_client: DaemonClient
) -> None:
    run = daemon_client.create_replay(OWNER, ReplayBody(source="orders", window="2024-01-05", tps=10))

    result = bot.slash(f"cancel {run.id}", user=STRANGER)

    [reply] = bot.replies(result.key, timeout_s=60)
    assert reply["response_type"] == "ephemeral"
    assert "may cancel" in reply["text"]
    [mine] = bot.replies(bot.slash(f"cancel {run.id}", user=OWNER).key, timeout_s=60)
    assert f"Cancelling `{run.id}`" in mine["text"]
    assert _wait_for_state(daemon_client, run.id).state == "cancelled"
