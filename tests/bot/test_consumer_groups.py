"""`/replay lag` and `/replay rewind` through signed requests to the bot, the real Replay Service and
the real broker, with the local Slack stand-in receiving the replies and the button clicks' answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from daemon.slack.group_messages import REWIND_CANCEL_ACTION, REWIND_CONFIRM_ACTION
from tests.fixtures.daemon import NO_JOBS, OWNER, DaemonProcess
from tests.fixtures.groups import FIRST, PER_PARTITION, behind_group, committed, produce
from tests.fixtures.slack import BotUnderTest

pytestmark = [pytest.mark.kafka, NO_JOBS]


@pytest.fixture(scope="module")
def live_topic(slack_daemon: DaemonProcess, kafka_bootstrap: str) -> str:
    catalog = yaml.safe_load(Path(slack_daemon.env["REPLAY_CATALOG_PATH"]).read_text())
    topic = str(catalog["sources"]["orders"]["live_topic"])
    produce(kafka_bootstrap, topic, PER_PARTITION, start_ms=int(FIRST.timestamp() * 1000))
    return topic


def _buttons(reply: dict[str, Any]) -> dict[str, str]:
    actions = [block for block in reply.get("blocks", []) if block["type"] == "actions"]
    return {b["action_id"]: b["value"] for block in actions for b in block["elements"]}


def test_lag_answers_with_the_partition_table_hottest_first(
    bot: BotUnderTest, kafka_bootstrap: str, live_topic: str
) -> None:
    group = behind_group(kafka_bootstrap, live_topic)  # committed 30, 35, 40 of 40 each

    result = bot.slash(f"lag {group} {live_topic}", user=OWNER)

    assert result.response.status_code == 200
    [reply] = bot.replies(result.key)
    assert reply["response_type"] == "ephemeral"
    assert f"Consumer group `{group}` on `{live_topic}`: lag 15" in reply["text"]
    assert f"hottest `{live_topic}[0]` with 10" in reply["text"]
    table = next(b["text"]["text"] for b in reply["blocks"] if "```" in b.get("text", {}).get("text", ""))
    rows = [line.split() for line in table.strip("`").splitlines()[1:]]
    assert [(row[1], row[2], row[3], row[4]) for row in rows] == [
        ("0", "30", "40", "10"),
        ("1", "35", "40", "5"),
        ("2", "40", "40", "0"),
    ]


def test_rewind_previews_with_buttons_and_the_requesters_click_applies_it_once(
    bot: BotUnderTest, kafka_bootstrap: str, live_topic: str
) -> None:
    group = behind_group(kafka_bootstrap, live_topic)

    result = bot.slash(f"rewind {group} {live_topic} to=2024-01-03T00:00:10", user=OWNER)
    [preview] = bot.replies(result.key)
    buttons = _buttons(preview)
    assert set(buttons) == {REWIND_CONFIRM_ACTION, REWIND_CANCEL_ACTION}
    assert "75 events are read again" in preview["text"]
    assert committed(kafka_bootstrap, group, live_topic) == {0: 30, 1: 35, 2: 40}

    _, someone_else = bot.click(REWIND_CONFIRM_ACTION, buttons[REWIND_CONFIRM_ACTION])
    assert f"Only <@{OWNER}> can answer" in bot.replies(someone_else)[0]["text"]
    assert committed(kafka_bootstrap, group, live_topic) == {0: 30, 1: 35, 2: 40}

    _, first = bot.click(REWIND_CONFIRM_ACTION, buttons[REWIND_CONFIRM_ACTION], user=OWNER)
    [applied] = bot.replies(first)
    assert applied["replace_original"] is True and "Rewound" in applied["text"]
    assert committed(kafka_bootstrap, group, live_topic) == {0: 10, 1: 10, 2: 10}

    _, second = bot.click(REWIND_CONFIRM_ACTION, buttons[REWIND_CONFIRM_ACTION], user=OWNER)
    assert "Already rewound from this confirmation" in bot.replies(second)[0]["text"]


def test_dismissing_a_rewind_moves_nothing(bot: BotUnderTest, kafka_bootstrap: str, live_topic: str) -> None:
    group = behind_group(kafka_bootstrap, live_topic)
    [preview] = bot.replies(bot.slash(f"rewind {group} {live_topic} to=earliest", user=OWNER).key)

    _, key = bot.click(REWIND_CANCEL_ACTION, _buttons(preview)[REWIND_CANCEL_ACTION], user=OWNER)

    assert "Dismissed" in bot.replies(key)[0]["text"]
    assert committed(kafka_bootstrap, group, live_topic) == {0: 30, 1: 35, 2: 40}


def test_a_rewind_by_someone_who_owns_nothing_on_the_topic_is_refused_ephemerally(
    bot: BotUnderTest, kafka_bootstrap: str, live_topic: str
) -> None:
    group = behind_group(kafka_bootstrap, live_topic)

    [reply] = bot.replies(bot.slash(f"rewind {group} {live_topic} to=earliest").key)

    assert reply["response_type"] == "ephemeral" and ":no_entry:" in reply["text"]
    assert "owners of the sources whose live topic it is" in reply["text"]
    assert _buttons(reply) == {}


def test_a_bad_rewind_is_answered_in_the_ack_naming_the_token(bot: BotUnderTest) -> None:
    result = bot.slash("rewind svc orders to=yesterday", user=OWNER)

    assert (
        "`to=yesterday`" in result.ack["text"] and "rewind &lt;group&gt; &lt;topic&gt;" in result.ack["text"]
    )
