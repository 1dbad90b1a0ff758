"""`/replay sources` and the owners' refusal, end to end: signed slash commands to the bot, the real
Replay Service (its catalog, GET /v1/sources, its authorization) and the local Slack stand-in."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from daemon.cli.main import EXIT_OK, main
from daemon.contract.client import DaemonClient
from scripts.devtools.slack_standin import SlackStandin
from tests.fixtures.daemon import OWNER, STRANGER, DaemonProcess, running_daemon
from tests.fixtures.slack import BotUnderTest, serve_bot

pytestmark = pytest.mark.kafka

RETENTION = "400 days in the lake, from 2023-01-01"


@pytest.fixture(scope="module")
def catalog_daemon(
    tmp_path_factory: pytest.TempPathFactory, sample_table: Path, kafka_bootstrap: str
) -> Iterator[DaemonProcess]:
    daemon = running_daemon(
        tmp_path_factory.mktemp("replayd-sources"),
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        source_extra={"retention": RETENTION, "description": "orders <all> & more"},
    )
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def bot(slack: SlackStandin, catalog_daemon: DaemonProcess) -> Iterator[BotUnderTest]:
    served = serve_bot(slack, catalog_daemon.url, catalog_daemon.token, daemon_timeout_s=30.0)
    try:
        yield served
    finally:
        served.server.stop()


def _reply(bot: BotUnderTest, text: str, *, user: str = OWNER) -> dict[str, Any]:
    result = bot.slash(text, user=user)
    assert result.response.status_code == 200
    [reply] = bot.replies(result.key, timeout_s=30)
    return reply


def _shown(reply: dict[str, Any]) -> str:
    """Everything Slack would draw: the blocks as JSON (mrkdwn escaped as sent)."""
    return json.dumps(reply["blocks"], ensure_ascii=False)


def test_the_api_serves_formats_and_the_retention_hint(catalog_daemon: DaemonProcess) -> None:
    with DaemonClient(base_url=catalog_daemon.url, token=catalog_daemon.token) as client:
        [source] = client.sources(STRANGER)

    assert (source.name, source.table_format, source.value_format) == ("orders", "parquet", "json")
    assert source.retention == RETENTION
    assert source.owners == [OWNER]


def test_sources_lists_name_description_owners_formats_live_topic_and_retention(bot: BotUnderTest) -> None:
    reply = _reply(bot, "sources", user=STRANGER)  # anyone may look; only replaying is for owners

    shown = _shown(reply)
    assert reply["response_type"] == "ephemeral"
    assert "Sources you can replay (1)" in shown
    assert "*orders*: orders &lt;all&gt; &amp; more" in shown
    assert f"Owners: <@{OWNER}>" in shown
    assert "parquet table → json values" in shown
    assert "Live topic: `orders-live-" in shown
    assert f"History: {RETENTION}" in shown


def test_sources_with_a_name_shows_that_source_as_a_card(bot: BotUnderTest) -> None:
    reply = _reply(bot, "sources orders")

    shown = _shown(reply)
    assert "Source orders" in shown
    assert "*Day windows by*\\n`dt`" in shown
    assert "*Pipelines' watermark*\\n`updated_at`" in shown
    assert "/replay plan orders last=6h" in shown


def test_sources_with_an_unknown_name_says_which_names_are_close(bot: BotUnderTest) -> None:
    reply = _reply(bot, "sources order")

    assert reply["text"] == ":no_entry: no source 'order' in the catalog (did you mean: orders)"


def test_sources_with_two_names_is_refused_in_the_ack_naming_the_extra_word(bot: BotUnderTest) -> None:
    result = bot.slash("sources orders payments")

    assert "`payments`: unexpected extra argument" in result.ack["text"]
    assert "/replay sources [source]" in result.ack["text"]


def test_a_not_an_owner_refusal_mentions_the_owners_instead_of_showing_escaped_text(
    bot: BotUnderTest,
) -> None:
    reply = _reply(bot, "orders 2024-01-01..2024-01-01 tps=10", user=STRANGER)

    assert f"only the owners of 'orders' (<@{OWNER}>) or a platform admin may replay it" in reply["text"]
    assert "&lt;@" not in _shown(reply)


def test_the_cli_lists_the_same_sources_as_plain_lines(
    catalog_daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLAY_DAEMON_URL", catalog_daemon.url)
    monkeypatch.setenv("REPLAY_API_TOKEN", catalog_daemon.token)
    monkeypatch.setenv("REPLAY_USER", STRANGER)
    out, err = io.StringIO(), io.StringIO()

    code = main(["sources"], out=out, err=err)

    assert code == EXIT_OK, err.getvalue()
    lines = out.getvalue().splitlines()
    assert lines[0] == "orders: orders <all> & more"
    assert lines[1:3] == [f"  owners: {OWNER}", "  formats: parquet table, json values"]
    assert lines[3].startswith("  live topic: orders-live-")
    assert lines[4] == f"  history: {RETENTION}"
