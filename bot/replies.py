"""Calling the Replay Service from a listener: every outcome becomes a message for the user.

Listeners run this after the ack, so a slow or dead daemon costs the user a clear ephemeral line,
never Slack's "operation_timeout". Refusals carry the daemon's own words (they name what was wrong).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

import structlog

from daemon.contract.client import DaemonClient
from daemon.contract.models import ReplayBody, RunCreated
from daemon.core.errors import BadRequest, DependencyDown, ReplayError, Unavailable
from daemon.slack.blocks import Message, escape, notice, refusal, unavailable

log = structlog.get_logger(__name__)

CREATE_ATTEMPTS = 2
RETRY_PAUSE_S = 1.0


def answer_with(work: Callable[[], Message], *, usage: str | None = None) -> Message:
    """Run `work`; a domain error becomes a refusal (with the usage line for bad input)."""
    return outcome_of(work, usage=usage)[0]


def outcome_of(work: Callable[[], Message], *, usage: str | None = None) -> tuple[Message, bool]:
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


def create_once(
    daemon: DaemonClient, actor: str, body: ReplayBody, *, key: str, pause_s: float = RETRY_PAUSE_S
) -> RunCreated:
    """`create_replay`, retried once on Unavailable: the Idempotency-Key makes the retry safe.

    A timeout leaves the user unsure whether a run exists; asking again with the same key
    answers that (the daemon returns the first run, `created: false`) without starting a second.
    """
    for attempt in range(1, CREATE_ATTEMPTS + 1):
        try:
            return daemon.create_replay(actor, body, idempotency_key=key)
        except DependencyDown:  # the daemon answered: no run exists, and asking again now finds the same
            raise
        except Unavailable:
            if attempt == CREATE_ATTEMPTS:
                raise
            time.sleep(pause_s)
    raise AssertionError("unreachable")


def key_for(prefix: str, *parts: str) -> str:
    """A bounded, stable Idempotency-Key from per-invocation values (trigger id, response url)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:40]
    return f"{prefix}-{digest}"
