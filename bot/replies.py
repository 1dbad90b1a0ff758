"""Calling the Replay Service from a listener: every outcome becomes a message for the user.

Listeners run this after the ack, so a slow or dead daemon costs the user a clear ephemeral line,
never Slack's "operation_timeout". Refusals carry the daemon's own words (they name what was wrong).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

import structlog

from daemon.contract.client import DaemonClient
from daemon.core.errors import BadRequest, ReplayError, Unavailable
from daemon.slack import messages as slack_blocks

log = structlog.get_logger(__name__)

CREATE_ATTEMPTS = 2
RETRY_PAUSE_S = 1.0


def answer_with(
    work: Callable[[], slack_blocks.Message], *, usage: str | None = None
) -> slack_blocks.Message:
    """Run `work`; a domain error becomes a refusal (with the usage line for bad input)."""
    return outcome_of(work, usage=usage)[0]


def outcome_of(
    work: Callable[[], slack_blocks.Message], *, usage: str | None = None
) -> tuple[slack_blocks.Message, bool]:
    """`answer_with`, also saying whether `work` went through: a button whose action was refused or
    could not reach the daemon stays in place for the next try, one that did its job is replaced."""
    try:
        return work(), True
    except Unavailable as exc:
        return slack_blocks.unavailable(str(exc)), False
    except BadRequest as exc:
        return slack_blocks.refusal(str(exc), usage), False
    except ReplayError as exc:  # Forbidden, NotFound, Conflict
        return slack_blocks.refusal(str(exc)), False
    except Exception:  # a bug: the user still hears back, the traceback goes to the log
        log.exception("listener failed")
        return slack_blocks.notice(":boom: Something went wrong on our side; it has been logged."), False


def create_once(
    daemon: DaemonClient, actor: str, body: dict[str, Any], *, key: str, pause_s: float = RETRY_PAUSE_S
) -> dict[str, Any]:
    """`create_replay`, retried once on Unavailable: the Idempotency-Key makes the retry safe.

    A timeout leaves the user unsure whether a run exists; asking again with the same key
    answers that (the daemon returns the first run, `created: false`) without starting a second.
    """
    for attempt in range(1, CREATE_ATTEMPTS + 1):
        try:
            return daemon.create_replay(actor, body, idempotency_key=key)
        except Unavailable:
            if attempt == CREATE_ATTEMPTS:
                raise
            time.sleep(pause_s)
    raise AssertionError("unreachable")


def key_for(prefix: str, *parts: str) -> str:
    """A bounded, stable Idempotency-Key from per-invocation values (trigger id, response url)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]
    return f"{prefix}-{digest}"
