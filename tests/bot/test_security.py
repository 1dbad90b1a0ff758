"""Only Slack may talk to the bot: a bad signature or a replayed (stale) request gets 401 from Bolt's
own verification, before any listener runs, so neither the daemon nor Slack hears of it."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from bot.app import create_app
from daemon.config.settings import load_settings
from daemon.contract.client import DaemonClient
from daemon.core.errors import ConfigError
from tests.fixtures.daemon_standin import DaemonStandin
from tests.fixtures.slack import (
    BOT_TOKEN,
    CHANNEL,
    SIGNING_SECRET,
    STANDIN_TOKEN,
    USER,
    BotUnderTest,
    action_body,
    signature_headers,
    slash_body,
)

GOOD = "orders 2024-01-01..2024-01-02 tps=100"


@pytest.fixture
def bot(start_bot: Callable[..., BotUnderTest], daemon_standin: DaemonStandin) -> BotUnderTest:
    return start_bot(daemon_standin.url, STANDIN_TOKEN)


def _assert_nobody_was_called(bot: BotUnderTest, daemon_standin: DaemonStandin) -> None:
    time.sleep(0.3)  # give a (wrongly) started lazy listener the time to show itself
    assert daemon_standin.calls == []
    assert bot.standin.calls() == []


def test_a_request_signed_with_another_secret_is_refused(
    bot: BotUnderTest, daemon_standin: DaemonStandin
) -> None:
    result = bot.slash(GOOD, secret="not-" + SIGNING_SECRET)

    assert result.response.status_code == 401
    _assert_nobody_was_called(bot, daemon_standin)


def test_a_request_older_than_five_minutes_is_refused(
    bot: BotUnderTest, daemon_standin: DaemonStandin
) -> None:
    result = bot.slash(GOOD, timestamp=int(time.time()) - 5 * 60 - 10)

    assert result.response.status_code == 401
    _assert_nobody_was_called(bot, daemon_standin)


def test_a_body_changed_after_signing_is_refused(bot: BotUnderTest, daemon_standin: DaemonStandin) -> None:
    signed = slash_body(
        GOOD, user=USER, channel=CHANNEL, response_url="http://127.0.0.1:9/r", trigger_id="1.2.3"
    )
    tampered = signed.replace("tps%3D100", "tps%3D100000")

    response = bot.post(tampered, signature_headers(signed))

    assert response.status_code == 401
    _assert_nobody_was_called(bot, daemon_standin)


def test_unsigned_requests_are_refused(bot: BotUnderTest, daemon_standin: DaemonStandin) -> None:
    body = slash_body(
        GOOD, user=USER, channel=CHANNEL, response_url="http://127.0.0.1:9/r", trigger_id="1.2.3"
    )

    response = bot.post(body, {"Content-Type": "application/x-www-form-urlencoded"})

    assert response.status_code == 401
    _assert_nobody_was_called(bot, daemon_standin)


def test_a_forged_button_click_is_refused(bot: BotUnderTest, daemon_standin: DaemonStandin) -> None:
    body = action_body(
        "replay_live_confirm", "{}", user=USER, channel=CHANNEL, response_url="http://127.0.0.1:9/r"
    )

    response = bot.post(body, signature_headers(body, secret="forged"))

    assert response.status_code == 401
    _assert_nobody_was_called(bot, daemon_standin)


def test_a_correctly_signed_request_is_accepted(bot: BotUnderTest) -> None:
    assert bot.slash("help").response.status_code == 200


def test_serving_over_http_without_a_signing_secret_is_refused_at_start_up() -> None:
    settings = load_settings({}, slack_bot_token=BOT_TOKEN)

    with pytest.raises(ConfigError, match="REPLAY_SLACK_SIGNING_SECRET"):
        create_app(settings, DaemonClient(base_url="http://127.0.0.1:9", token="t"))


def test_socket_mode_needs_no_signing_secret() -> None:
    settings = load_settings({}, slack_bot_token=BOT_TOKEN, slack_app_token="xapp-1-test")

    app = create_app(settings, DaemonClient(base_url="http://127.0.0.1:9", token="t"))

    assert app.client.token == BOT_TOKEN
