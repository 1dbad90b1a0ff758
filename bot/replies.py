"""Calling the Replay Service from a listener: every outcome becomes a message for the user.

Listeners run this after the ack, so a slow or dead daemon costs the user a clear ephemeral line,
never Slack's "operation_timeout". Refusals carry the daemon's own words (they name what was wrong).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

import structlog

from daemon.core.errors import BadRequest, DependencyDown, ReplayError, Unavailable
from daemon.slack.blocks import Message, escape, notice, refusal, unavailable

log = structlog.get_logger(__name__)

Answer = TypeVar("Answer", Message, Message | None)  # None: nothing to add to the ack


def answer_with(work: Callable[[], Answer], *, usage: str | None = None) -> Answer | Message:
    """Run `work`; a domain error becomes a refusal (with the usage line for bad input)."""
    return outcome_of(work, usage=usage)[0]


def outcome_of(work: Callable[[], Answer], *, usage: str | None = None) -> tuple[Answer | Message, bool]:
    """`answer_with`, also saying whether `work` went through: a button whose action was refused or
    could not reach the daemon stays in place for the next try, one that did its job is replaced."""
    try:
        return work(), True
    except DependencyDown as exc:  # the service answered: point at what is down, not at the service
        return dependency_down(str(exc)), False
    except Unavailable as exc:
        return unavailable(str(exc)), False
    except BadRequest as exc:
        return refusal(str(exc), usage), False
    except ReplayError as exc:  # Forbidden, NotFound, Conflict
        return refusal(str(exc)), False
    except Exception:  # a bug: the user still hears back, the traceback goes to the log
        log.exception("listener failed")
        return notice(":boom: Something went wrong on our side; it has been logged."), False


def dependency_down(detail: str) -> Message:
    """The Replay Service is up and says which of its own dependencies is not (and where it looked)."""
    return notice(f":electric_plug: The Replay Service is up, but could not do that: {escape(detail)}.")


def key_for(prefix: str, *parts: str) -> str:
    """A bounded, stable Idempotency-Key from per-invocation values (trigger id, response url)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]
    return f"{prefix}-{digest}"
