"""`/replay` through Bolt's real HTTP endpoint: what the ack says, what happens after it.

The Replay Service here is a stand-in that counts its calls, so "the daemon was never asked" is an
exact assertion; the same flows against the real daemon are in `test_bot_e2e.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scripts.devtools.slack_standin import SlackStandin
from tests.fixtures.daemon_standin import DaemonStandin
from tests.fixtures.slack import CHANNEL, OTHER_USER, STANDIN_TOKEN, USER, BotUnderTest

GOOD = "orders 2024-01-01..2024-01-02 tps=100"


@pytest.fixture
def bot(start_bot: Callable[..., BotUnderTest], daemon_standin: DaemonStandin) -> BotUnderTest:
    return start_bot(daemon_standin.url, STANDIN_TOKEN, daemon_timeout_s=2.0)


def _text(message: dict[str, Any]) -> str:
    text = message.get("text", "")
    assert isinstance(text, str), message
    return text


@pytest.mark.parametrize(
    ("text", "token", "why"),
    [
        ("orders 2024-01-07..2024-01-01", "`2024-01-07..2024-01-01`", "window ends before it starts"),
        ("orders 2024-01-01..2024-01-02 tps=0", "`tps=0`", "must be at least 1"),
        ("orders 2024-01-01..2024-01-02 tps=abc", "`tps=abc`", "is not a number"),
        ("orders 2024-01-01..2024-01-02 pace=5", "`pace=5`", "unknown option 'pace'"),
        ("", None, "no command given"),
        ("orders 2024-01-01..2024-01-02 tps=1\u200b0", "`tps=1\u200b0`", "U+200B"),
        ("ordérs 2024-01-01", "`ordérs`", "not a source name"),
    ],
)
def test_bad_input_is_answered_in_the_ack_naming_the_token_and_never_reaches_the_daemon(
    bot: BotUnderTest, daemon_standin: DaemonStandin, text: str, token: str | None, why: str
) -> None:
    result = bot.slash(text)

    assert result.response.status_code == 200
    assert result.ack["response_type"] == "ephemeral"
    assert why in _text(result.ack)
    if token is not None:
        assert token in _text(result.ack)
    assert "Usage:" in _text(result.ack)
    assert daemon_standin.calls == []
    assert bot.standin.responses(result.key) == []


def test_slack_escaped_characters_are_decoded_before_parsing(
    bot: BotUnderTest, daemon_standin: DaemonStandin
) -> None:
    result = bot.slash("orders 2024-01-01..2024-01-02 headers=team:a&amp;b")

    bot.replies(result.key)
    assert daemon_standin.calls[0][2]["headers"] == {"team": "a&b"}


def test_a_good_replay_is_acked_with_an_echo_and_accepted_after_the_ack(
    bot: BotUnderTest, daemon_standin: DaemonStandin
) -> None:
    result = bot.slash("orders 2024-01-01..2024-01-02 tps=10k")

    assert "/replay orders 2024-01-01..2024-01-02 tps=10000" in _text(result.ack)
    [reply] = bot.replies(result.key)
    [run] = daemon_standin.created()
    assert reply["response_type"] == "ephemeral"
    assert f"Accepted as `{run['id']}`" in reply["text"]
    assert run["slack_channel"] == CHANNEL
    assert run["requester"] == USER


def test_the_bot_does_not_post_the_run_announcement_itself(bot: BotUnderTest) -> None:
    result = bot.slash(GOOD)

    bot.replies(result.key)
    assert bot.standin.calls("chat.postMessage") == []


def test_the_same_slash_command_delivered_twice_creates_one_run(
    bot: BotUnderTest, daemon_standin: DaemonStandin
) -> None:
    first = bot.slash(GOOD, trigger_id="111.222.abc")
    bot.replies(first.key)
    again = bot.slash(GOOD, trigger_id="111.222.abc")
    [reply] = bot.replies(again.key)

    assert len(daemon_standin.created()) == 1
    assert "Already accepted" in reply["text"]
    keys = {call[2]["_key"] for call in daemon_standin.calls}
    assert len(keys) == 1 and None not in keys


def test_help_is_answered_in_the_ack_without_the_daemon(
    bot: BotUnderTest, daemon_standin: DaemonStandin
) -> None:
    result = bot.slash("help")

    assert result.ack["response_type"] == "ephemeral"
    assert "/replay status [run-id]" in _text(result.ack)
    assert daemon_standin.calls == []


def test_plan_answers_with_a_dry_run_summary(bot: BotUnderTest, daemon_standin: DaemonStandin) -> None:
    result = bot.slash("plan orders 2024-01-01..2024-01-02 tps=100")

    [reply] = bot.replies(result.key)
    assert "600 rows" in reply["text"]
    assert daemon_standin.created() == []


def test_status_and_list_answer_ephemerally(bot: BotUnderTest, daemon_standin: DaemonStandin) -> None:
    bot.replies(bot.slash(GOOD).key)
    [run] = daemon_standin.created()

    [status] = bot.replies(bot.slash(f"status {run['id']}").key)
    [mine] = bot.replies(bot.slash("list mine").key)
    [latest] = bot.replies(bot.slash("status").key)

    assert run["id"] in status["text"] and status["response_type"] == "ephemeral"
    assert run["id"] in mine["text"]
    assert run["id"] in latest["text"]


def test_cancelling_someone_elses_run_is_refused_ephemerally(
    bot: BotUnderTest, daemon_standin: DaemonStandin
) -> None:
    bot.replies(bot.slash(GOOD).key)
    [run] = daemon_standin.created()

    [reply] = bot.replies(bot.slash(f"cancel {run['id']}", user=OTHER_USER).key)

    assert reply["response_type"] == "ephemeral"
    assert "only the requester may cancel this run" in reply["text"]
    assert daemon_standin.runs[run["id"]]["state"] == "queued"


def test_unknown_run_is_a_clear_refusal(bot: BotUnderTest) -> None:
    [reply] = bot.replies(bot.slash("status r-0123456789ab").key)

    assert "no run with id 'r-0123456789ab'" in reply["text"]


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_failing_daemon_gets_a_clear_ephemeral_message_and_creates_nothing(
    bot: BotUnderTest, daemon_standin: DaemonStandin, status: int
) -> None:
    daemon_standin.fail_status = status

    result = bot.slash(GOOD)

    assert result.response.status_code == 200
    [reply] = bot.replies(result.key)
    assert reply["response_type"] == "ephemeral"
    assert "The Replay Service did not answer" in reply["text"]
    assert daemon_standin.created() == []


def test_a_daemon_that_is_down_gets_a_clear_ephemeral_message(
    start_bot: Callable[..., BotUnderTest], slack_standin: SlackStandin
) -> None:
    bot = start_bot("http://127.0.0.1:9", STANDIN_TOKEN)  # discard port: connection refused

    result = bot.slash(GOOD)

    assert result.response.status_code == 200
    [reply] = bot.replies(result.key)
    assert "The Replay Service did not answer" in reply["text"]
    assert "is not reachable" in reply["text"]


def test_a_daemon_that_times_out_gets_a_clear_ephemeral_message_and_the_ack_is_not_delayed(
    bot: BotUnderTest, daemon_standin: DaemonStandin
) -> None:
    daemon_standin.delay_s = 3.0  # longer than the bot's 2 s daemon timeout

    result = bot.slash("list")

    assert result.response.elapsed.total_seconds() < 1.0
    [reply] = bot.replies(result.key, timeout_s=20)
    assert "did not answer in time" in reply["text"]


def test_the_first_request_checks_the_token_against_the_configured_slack(bot: BotUnderTest) -> None:
    bot.slash("help")

    assert len(bot.standin.calls("auth.test")) == 1
