"""The audit log: an append-only record of who asked for what and what we answered."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from daemon.core.states import Outcome
from store.models import AuditEntry

if TYPE_CHECKING:
    from store.db import Store


class AuditLog:
    """Append and read ``audit_log``; entries are never updated or deleted."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def append(
        self,
        actor: str,
        action: str,
        target: str | None = None,
        outcome: str = Outcome.ACCEPTED,
        detail: Mapping[str, Any] | None = None,
    ) -> AuditEntry:
        entry = AuditEntry(
            at=self._store.now(),
            actor=actor,
            action=action,
            target=target,
            outcome=str(outcome),
            detail=dict(detail or {}),
        )
        with self._store.session() as session:
            session.add(entry)
        return entry

    def list(
        self, limit: int = 50, *, actor: str | None = None, target: str | None = None
    ) -> builtins.list[AuditEntry]:
        """Newest first."""
        stmt = select(AuditEntry).order_by(AuditEntry.at.desc(), AuditEntry.id.desc()).limit(limit)
        if actor is not None:
            stmt = stmt.where(AuditEntry.actor == actor)
        if target is not None:
            stmt = stmt.where(AuditEntry.target == target)
        with self._store.session() as session:
            return list(session.scalars(stmt))
