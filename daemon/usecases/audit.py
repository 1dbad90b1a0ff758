"""Every request a person made, accepted or refused, goes to the audit log through here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from daemon.core.errors import ReplayError
from store import Store

T = TypeVar("T")


class Audit:
    def __init__(self, store: Store) -> None:
        self._store = store

    def accepted(self, actor: str, action: str, target: str | None, **detail: Any) -> None:
        self._store.audit.append(actor=actor, action=action, target=target, outcome="accepted", detail=detail)

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
                detail={"reason": str(exc), **detail},
            )
            raise
