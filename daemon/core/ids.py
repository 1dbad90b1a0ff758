"""Identifiers the store hands out: short, typed by prefix, safe to paste into Slack."""

from __future__ import annotations

import secrets


def new_run_id() -> str:
    """``r-`` + 12 hex digits (48 random bits: collisions are not a practical concern)."""
    return f"r-{secrets.token_hex(6)}"


def new_pipeline_id() -> str:
    """``p-`` + 12 hex digits."""
    return f"p-{secrets.token_hex(6)}"
