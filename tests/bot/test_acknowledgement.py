"""The `/replay` ack speaks the forgiving grammar: it echoes the canonical command, and refuses at
once, with the service's real maximum, what the service would refuse later."""

from __future__ import annotations

from bot.listeners.commands import acknowledgement
from daemon.config.settings import load_settings


def test_the_ack_echoes_the_canonical_command_for_a_forgiving_spelling() -> None:
    message = acknowledgement("Orders 2024-01-01\u20132024-01-07 tps=10k", load_settings({}).limits)

    assert message is not None
    assert "/replay orders 2024-01-01..2024-01-07 tps=10000" in message.text
    assert "asking the Replay Service" in message.text


def test_the_ack_refuses_a_rate_over_the_services_maximum_naming_it() -> None:
    message = acknowledgement("orders last=6h tps=500000", load_settings({}).limits)

    assert message is not None
    assert "tps=500000 is above this platform's maximum of 200000" in message.text


def test_a_service_configured_higher_lets_the_ack_accept_more() -> None:
    raised = load_settings({"REPLAY_MAX_TPS": "600000"}).limits

    message = acknowledgement("orders last=6h tps=500k", raised)

    assert message is not None and "/replay orders last=6h tps=500000" in message.text


def test_the_ack_shows_the_one_correction_of_a_refused_window() -> None:
    message = acknowledgement("orders 2024-01-01...2024-01-07")

    assert message is not None
    assert "did you mean `orders 2024-01-01..2024-01-07`?" in message.text
