"""The Slack app manifest asks for what the code uses, and points Slack where `replay-bot` listens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.server import EVENTS_PATH

MANIFEST = Path(__file__).resolve().parents[2] / "slack-app-manifest.yaml"


def _manifest() -> dict[str, Any]:
    manifest: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    return manifest


def test_the_manifest_declares_the_replay_command_on_the_events_path_unescaped() -> None:
    [command] = _manifest()["features"]["slash_commands"]

    assert command["command"] == "/replay"
    assert command["url"].endswith(EVENTS_PATH)
    assert command["should_escape"] is False


def test_the_manifest_asks_for_exactly_the_scopes_the_app_uses() -> None:
    scopes = _manifest()["oauth_config"]["scopes"]["bot"]

    assert sorted(scopes) == [
        "channels:read",
        "chat:write",
        "chat:write.public",
        "commands",
        "files:write",
        "groups:read",
        "im:write",
        "users:read",
    ]


def test_buttons_come_to_the_same_path_and_socket_mode_is_off_by_default() -> None:
    settings = _manifest()["settings"]

    assert settings["interactivity"]["is_enabled"] is True
    assert settings["interactivity"]["request_url"].endswith(EVENTS_PATH)
    assert settings["socket_mode_enabled"] is False
