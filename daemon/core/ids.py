"""Identifiers the platform hands out: short, typed by prefix, safe to paste into Slack.

The patterns are the one definition of what a run or pipeline id looks like; the grammar, Slack
rendering and the store all use them.
"""

from __future__ import annotations

import re
import secrets

ID_HEX_DIGITS = 12
RUN_ID_PATTERN = re.compile(rf"r-[0-9a-f]{{{ID_HEX_DIGITS}}}")
PIPELINE_ID_PATTERN = re.compile(rf"p-[0-9a-f]{{{ID_HEX_DIGITS}}}")
# Kafka's own legal characters for topics; consumer group ids are held to the same (shell-safe) set.
TOPIC_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,249}")
GROUP_ID_PATTERN = TOPIC_PATTERN
# A Slack user id (U… or W… in Enterprise Grid): who a personal API token acts as.
USER_ID_PATTERN = re.compile(r"[UW][A-Z0-9]{2,20}")


def new_run_id() -> str:
    """``r-`` + 12 hex digits (48 random bits: collisions are not a practical concern)."""
    return f"r-{secrets.token_hex(ID_HEX_DIGITS // 2)}"


def new_pipeline_id() -> str:
    """``p-`` + 12 hex digits."""
    return f"p-{secrets.token_hex(ID_HEX_DIGITS // 2)}"


def new_control_key() -> str:
    """A run's control key: 32 random bytes, hex. The daemon signs the run's control messages with
    it and the run's job, which gets it in its spec, follows only messages it verifies."""
    return secrets.token_hex(32)
