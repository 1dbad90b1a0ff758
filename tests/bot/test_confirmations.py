"""`topic=live` asks first: buttons, only the requester may press them, one run per confirmation.

Against the stand-in daemon, which keeps the real daemon's idempotency rule (one run per
requester and key); the same flow against the real daemon is in `test_bot_e2e.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from bot.confirmation import CONFIRM_TTL_S, LiveRequest
from daemon.slack.run_messages import CANCEL_ACTION, CONFIRM_ACTION
from tests.fixtures.daemon_standin import DaemonStandin
from tests.fixtures.slack import OTHER_USER, STANDIN_TOKEN, USER, BotUnderTest

LIVE = "orders 2024-01-01..2024-01-02 tps=100 topic=live"


class Clock:
    def __init__(self) -> None:
        self.now = 1_714_557_600.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def bot(start_bot: Callable[..., BotUnderTest], daemon_standin: DaemonStandin, clock: Clock) -> BotUnderTest:
    return start_bot(daemon_standin.url, STANDIN_TOKEN, clock=clock)


def _buttons(bot: BotUnderTest, key: str) -> dict[str, str]:
    [reply] = bot.replies(key)
    [actions] = [block for block in reply["blocks"] if block["type"] == "actions"]
    return {button["action_id"]: button["value"] for button in actions["elements"]}


def _creates(daemon_standin: DaemonStandin) -> list[dict[str, Any]]:
    return [body for method, path, body in daemon_standin.calls if (method, path) == ("POST", "/v1/replays")]


def test_a_live_replay_shows_buttons_and_launches_nothing(
    bot: BotUnderTest, daemon_standin: DaemonStandin
) -> None:
    result = bot.slash(LIVE)

    buttons = _buttons(bot, result.key)
    [reply] = bot.standin.responses(result.key)
    assert reply["response_type"] == "ephemeral"
    assert "live* topic `orders`" in reply["text"]
    assert set(buttons) == {CONFIRM_ACTION, CANCEL_ACTION}
    assert LiveRequest.decode(buttons[CONFIRM_ACTION]).requester == USER
    assert _creates(daemon_standin) == []
    assert [path for _, path, _ in daemon_standin.calls] == ["/v1/plans"]


def test_confirming_launches_with_confirm_live_and_replaces_the_buttons(
    bot: BotUnderTest, daemon_standin: DaemonStandin
) -> None:
    value = _buttons(bot, bot.slash(LIVE).key)[CONFIRM_ACTION]

    response, key = bot.click(CONFIRM_ACTION, value)

    assert response.status_code == 200
    [outcome] = bot.replies(key)
    [create] = _creates(daemon_standin)
    [run] = daemon_standin.created()
    assert create["confirm_live"] is True
    assert create["_key"] == LiveRequest.decode(value).idempotency_key()
    assert outcome["replace_original"] is True
    assert f"Accepted as `{run['id']}`" in outcome["text"]
    assert "blocks" not in outcome or all(b["type"] != "actions" for b in outcome["blocks"])


def test_someone_else_clicking_is_refused_and_launches_nothing(
    bot: BotUnderTest, daemon_standin: DaemonStandin
) -> None:
    value = _buttons(bot, bot.slash(LIVE).key)[CONFIRM_ACTION]

    _, key = bot.click(CONFIRM_ACTION, value, user=OTHER_USER)

    [refusal] = bot.replies(key)
    assert refusal["response_type"] == "ephemeral"
    assert refusal["replace_original"] is False
    assert f"Only <@{USER}> can answer this confirmation" in refusal["text"]
    assert _creates(daemon_standin) == []


def test_a_double_click_launches_once_and_says_so(bot: BotUnderTest, daemon_standin: DaemonStandin) -> None:
    value = _buttons(bot, bot.slash(LIVE).key)[CONFIRM_ACTION]
    keys: list[str] = []

    clicks = [
        threading.Thread(target=lambda: keys.append(bot.click(CONFIRM_ACTION, value)[1])) for _ in range(2)
    ]
    for click in clicks:
        click.start()
    for click in clicks:
        click.join()

    outcomes = [bot.replies(key)[0]["text"] for key in keys]
    assert len(daemon_standin.created()) == 1
    assert len(_creates(daemon_standin)) == 2
    assert sum("Accepted as" in text for text in outcomes) == 1
    assert sum("this click started nothing new" in text for text in outcomes) == 1


def test_a_click_after_the_confirmation_expired_launches_nothing(
    bot: BotUnderTest, daemon_standin: DaemonStandin, clock: Clock
) -> None:
    value = _buttons(bot, bot.slash(LIVE).key)[CONFIRM_ACTION]
    clock.now += CONFIRM_TTL_S + 1

    _, key = bot.click(CONFIRM_ACTION, value)

    [outcome] = bot.replies(key)
    assert "expired" in outcome["text"]
    assert outcome["replace_original"] is True
    assert _creates(daemon_standin) == []


def test_cancel_dismisses_the_confirmation_and_launches_nothing(
    bot: BotUnderTest, daemon_standin: DaemonStandin
) -> None:
    value = _buttons(bot, bot.slash(LIVE).key)[CANCEL_ACTION]

    _, key = bot.click(CANCEL_ACTION, value)

    [outcome] = bot.replies(key)
    assert "nothing will be published" in outcome["text"]
    assert _creates(daemon_standin) == []


def test_a_button_value_we_did_not_write_is_refused(bot: BotUnderTest, daemon_standin: DaemonStandin) -> None:
    _, key = bot.click(CONFIRM_ACTION, '{"v": 1, "command": "orders 2024-01-01"}')

    [outcome] = bot.replies(key)
    assert "not one of ours" in outcome["text"]
    assert daemon_standin.calls == []
