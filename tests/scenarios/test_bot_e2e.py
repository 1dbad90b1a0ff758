"""End to end: signed slash commands to the bot, the real Replay Service (SQLite, local Spark, the real
broker) and the local Slack stand-in, which receives the bot's replies and the daemon's thread."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import cast

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


def _thread_of(slack: SlackStandin, run_id: str, channel: str = CHANNEL) -> list[Posted]:
    parents = [m for m in slack.messages(channel) if m.thread_ts is None and run_id in m.text]
    return slack.thread(channel, parents[0].ts) if parents else []


def _finished_thread(slack: SlackStandin, run_id: str, channel: str = CHANNEL) -> list[Posted]:
    """Parent, progress message, final reply and the chart, once all four are there."""
    return cast(
        list[Posted],
        slack.wait_until(
            lambda: (t := _thread_of(slack, run_id, channel)) and len(t) >= 4 and t,
            timeout_s=30,
            what=f"the final reply and the chart of {run_id}",
        ),
    )


def test_a_slash_command_becomes_one_thread_with_one_live_progress_message_a_report_and_a_chart(
    bot: BotUnderTest, slack: SlackStandin, daemon_client: DaemonClient, kafka_bootstrap: str
) -> None:
    # 600 rows: ~10 s of sending at 60/s, ~1.8 s more for a ramp from 6/s over its first 4 s; a byte
    # ceiling far above what 60/s sends, which never holds anything back
    result = bot.slash("orders 2024-01-02..2024-01-03 tps=60 ramp=4s max_mb=1", user=OWNER)
    run_id = _accepted_run_id(bot, result.key)

    run = _wait_for_state(daemon_client, run_id)
    assert run.state == "succeeded", run.failure_reason
    thread = _finished_thread(slack, run_id)

    print(slack.render_thread(CHANNEL, thread[0].ts))
    parent, progress, final, chart = thread
    assert "succeeded" in repr(parent.blocks) and parent.edits >= 2  # running, then the final state
    assert progress.edits >= 2 and "600* of 600 confirmed" in progress.text  # one message, edited in place
    assert f"<@{OWNER}>" in final.text  # the final word mentions the requester
    report = re.search(r"The broker confirmed \*([\d,]+)\* events", final.text)
    assert report is not None, final.text
    confirmed = int(report[1].replace(",", ""))
    assert confirmed == topic_record_count(kafka_bootstrap, run.topic) == run.confirmed == 600
    assert "Reconcile:* clean" in final.text
    assert run.reconcile is not None and (run.reconcile.selected, run.reconcile.found) == (600, 600)
    assert (run.reconcile.missing, run.reconcile.unexpected, run.reconcile.duplicates) == (0, 0, 0)
    assert run.duplicates == 0 and run.has_series
    [shared] = chart.files
    png = slack.file_bytes(shared["id"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    assert daemon_client.chart_png(OWNER, run_id).startswith(b"\x89PNG")
    series = daemon_client.rate_series(OWNER, run_id)
    assert sum(series.counts) == 600 and series.target_tps == 60
    assert "60/s after a 4s ramp from 6/s, at most 1 MB/s" in repr(parent.blocks)
    assert "max_mb=1 never held events back" in final.text and run.bytes_held_s == 0.0
    # the chart's target line is the ramp's, from its first second, then the asked rate
    assert series.targets[0] < 20 and series.targets[4:] == [60.0] * (len(series.counts) - 4), series


def test_reconcile_on_demand_answers_in_the_runs_thread(
    bot: BotUnderTest, slack: SlackStandin, daemon_client: DaemonClient
) -> None:
    run = _wait_for_state(
        daemon_client, _accepted_run_id(bot, bot.slash("orders 2024-01-06 tps=1000", user=OWNER).key)
    )
    assert run.state == "succeeded", run.failure_reason
    _finished_thread(slack, run.id)

    [reply] = bot.replies(bot.slash(f"reconcile {run.id}", user=STRANGER).key, timeout_s=60)
    assert f"Reconciling `{run.id}`" in reply["text"]

    def reconciled() -> RunOut | None:
        found = daemon_client.get_replay(OWNER, run.id)
        return found if found.reconcile is not None and found.reconcile.on_demand else None

    checked = cast(RunOut, slack.wait_until(reconciled, timeout_s=RUN_TIMEOUT_S, what="the reconcile"))
    assert checked.reconcile is not None and checked.reconcile.verdict().clean
    assert checked.reconcile.found == checked.confirmed == 300
    slack.wait_until(
        lambda: any("Reconcile of" in m.text for m in _thread_of(slack, run.id)),
        timeout_s=30,
        what="the reconcile reply in the run's thread",
    )
    assert run.id in {r.id for r in daemon_client.list_replays(OWNER, limit=200).runs}
    assert all(r.kind != "reconcile" for r in daemon_client.list_replays(OWNER, limit=200).runs)


def test_a_private_channel_the_bot_is_not_in_gets_the_thread_in_the_requesters_dm(
    bot: BotUnderTest, slack: SlackStandin, daemon_client: DaemonClient
) -> None:
    hidden = "C0HIDDEN"
    slack.set_channel(hidden, member=False, private=True)

    result = bot.slash("orders 2024-01-07 tps=1000", user=OWNER, channel=hidden)

    [reply] = bot.replies(result.key, timeout_s=60)
    assert "direct messages" in reply["text"] and "channel_not_found" in reply["text"]
    run_id = _accepted_run_id(bot, result.key)
    run = _wait_for_state(daemon_client, run_id)
    assert run.state == "succeeded" and run.slack_channel is not None and run.slack_channel != hidden
    thread = _finished_thread(slack, run_id, run.slack_channel)
    assert f"<@{OWNER}>" in thread[2].text
    assert not [m for m in slack.messages(hidden) if run_id in m.text]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("ordres 2024-01-02", "unknown source 'ordres'"),
        ("orders 2024-01-07..2024-01-01", "`2024-01-07..2024-01-01`: window ends before it starts"),
        ("orders 2024-01-02 tps=0", "`tps=0`: must be at least 1"),
        ("orders 2024-01-02 tps=abc", "`tps=abc`: 'abc' is not a number"),
        ("orders 2024-01-02 pace=5", "`pace=5`: unknown option 'pace'"),
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


def test_a_replay_on_the_original_timeline_is_planned_from_its_own_times_and_charted_against_them(
    bot: BotUnderTest, slack: SlackStandin, daemon_client: DaemonClient
) -> None:
    """A day of the sample at 4,320x (20 s) under max=50/s: the plan reads the day's own times (its
    busiest second, and that the ceiling never binds), the run keeps them, and its chart's target
    line is what those times put in each second."""
    words = "orders 2024-01-05 tps=original speed=4320x max=50"
    [planned] = bot.replies(bot.slash(f"plan {words}", user=OWNER).key, timeout_s=60)
    assert "Shape: its own times at 4320x: busiest second" in repr(planned["blocks"])
    assert "never above max=50/s" in repr(planned["blocks"])

    run = _wait_for_state(daemon_client, _accepted_run_id(bot, bot.slash(words, user=OWNER).key))

    assert run.state == "succeeded", run.failure_reason
    assert run.speed == 4320.0 and run.tps == 50 and run.confirmed == 300
    assert run.reconcile is not None and run.reconcile.verdict().clean
    parent, _, final, _ = _finished_thread(slack, run.id)
    assert "the original timeline at 4320x, at most 50/s" in repr(parent.blocks)
    assert "(asked the original timeline at 4320x, at most 50/s)" in final.text
    assert "never above max=50/s" in final.text and run.slid_s == 0.0
    series = daemon_client.rate_series(OWNER, run.id)
    assert len(series.targets) == len(series.counts) and max(series.targets) <= 50
    # a day's events spread evenly, 4,320 times faster: about 15 a second, every second of the run
    assert 10 <= sum(series.counts) / len(series.counts) <= 20, series
