"""Every request a person made, accepted or refused, goes to the audit log through here.

Beside the actor, each entry names the credential the request came with (``credential``: the
bot's ``service`` token, which vouches for a Slack user, or the user's own ``personal`` token), set
by the API for the request being served; entries written outside a request (the scheduler, the
janitor) carry none.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, NoReturn, TypeVar

from daemon.core.errors import ReplayError
from store import Store

T = TypeVar("T")
CREDENTIAL: ContextVar[str | None] = ContextVar("credential", default=None)


def _with_credential(detail: dict[str, Any]) -> dict[str, Any]:
    credential = CREDENTIAL.get()
    return detail if credential is None else {**detail, "credential": credential}


class Audit:
    def __init__(self, store: Store) -> None:
        self._store = store

    def accepted(self, actor: str, action: str, target: str | None, **detail: Any) -> None:
        self._store.audit.append(
            actor=actor, action=action, target=target, outcome="accepted", detail=_with_credential(detail)
        )

    def refusing(
        self, actor: str, action: str, target: str | None, work: Callable[[], T], **detail: Any
    ) -> T:
        """Run `work`; a domain error it raises is recorded as a refusal, with its reason, and re-raised."""
        try:
            return work()
        except ReplayError as exc:
            self._store.audit.append(
                actor=actor,
                action=action,
                target=target,
                outcome="refused",
                detail=_with_credential({"reason": str(exc), **detail}),
            )
            raise

    def refuse(
        self, actor: str, action: str, target: str | None, error: ReplayError, **detail: Any
    ) -> NoReturn:
        """Record ``error`` as a refusal of ``action``, then raise it."""
        self._store.audit.append(
            actor=actor,
            action=action,
            target=target,
            outcome="refused",
            detail=_with_credential({"reason": str(error), **detail}),
        )
        raise error
