"""Notifications: at-most-once Slack messages, keyed by a caller-chosen ``dedup_key``.

The unique constraint on ``dedup_key`` is the arbiter, so two daemons (or a retry after a
crash) racing to announce the same event produce exactly one "first" caller. The insert uses
``ON CONFLICT DO NOTHING`` (PostgreSQL and SQLite alike), so the loser sees False, not an error.

A message that must not be lost (the janitor's prompts, a run's final reply) is recorded, sent, then
``mark_delivered``; one recorded but never delivered (Slack refused it, or a crash in between) is
taken again by ``reclaim`` once it is old.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import CursorResult, delete, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from daemon.core.errors import NotificationNotFound
from store.models import Notification

if TYPE_CHECKING:
    from store.db import Store


class NotificationRepository:
    """Reads and writes of ``notifications``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def record_once(
        self,
        dedup_key: str,
        *,
        kind: str,
        channel: str | None = None,
        run_id: str | None = None,
        pipeline_id: str | None = None,
        payload: Mapping[str, Any] | None = None,
        slack_ts: str | None = None,
        sent_at: datetime | None = None,
    ) -> bool:
        """Record the notification; True only for the first caller with this ``dedup_key``."""
        values = {
            "dedup_key": dedup_key,
            "channel": channel,
            "kind": kind,
            "run_id": run_id,
            "pipeline_id": pipeline_id,
            "payload": dict(payload or {}),
            "slack_ts": slack_ts,
            "sent_at": sent_at or self._store.now(),
        }
        insert = postgresql_insert if self._store.dialect == "postgresql" else sqlite_insert
        stmt = (
            insert(Notification)
            .values(values)
            .on_conflict_do_nothing(index_elements=["dedup_key"])
            .returning(Notification.id)  # rowcount is unreliable here (-1 on psycopg)
        )
        with self._store.session() as session:
            return session.execute(stmt).scalar_one_or_none() is not None

    def get(self, dedup_key: str) -> Notification | None:
        """The recorded notification, or None if it was never sent (the normal "not yet" answer)."""
        with self._store.session() as session:
            return session.scalars(
                select(Notification).where(Notification.dedup_key == dedup_key)
            ).one_or_none()

    def set_ts(self, dedup_key: str, slack_ts: str) -> None:
        """Remember the Slack message ts, so later updates can edit or thread under it."""
        stmt = (
            update(Notification)
            .where(Notification.dedup_key == dedup_key)
            .values(slack_ts=slack_ts)
            .execution_options(synchronize_session=False)
        )
        with self._store.session() as session:
            if cast(CursorResult[Any], session.execute(stmt)).rowcount != 1:
                raise NotificationNotFound(dedup_key)

    def set_channel(self, dedup_key: str, channel: str) -> None:
        """Where the message was delivered (a DM, or the fallback channel when the DM failed)."""
        stmt = (
            update(Notification)
            .where(Notification.dedup_key == dedup_key)
            .values(channel=channel)
            .execution_options(synchronize_session=False)
        )
        with self._store.session() as session:
            if cast(CursorResult[Any], session.execute(stmt)).rowcount != 1:
                raise NotificationNotFound(dedup_key)

    def mark_delivered(self, dedup_key: str, channel: str | None = None) -> None:
        """Slack accepted the message (in `channel` when given: a DM, or the fallback channel)."""
        values: dict[str, Any] = {"delivered_at": self._store.now()}
        if channel is not None:
            values["channel"] = channel
        stmt = (
            update(Notification)
            .where(Notification.dedup_key == dedup_key)
            .values(values)
            .execution_options(synchronize_session=False)
        )
        with self._store.session() as session:
            if cast(CursorResult[Any], session.execute(stmt)).rowcount != 1:
                raise NotificationNotFound(dedup_key)

    def undelivered(
        self, kind: str, *, recorded_before: datetime, recorded_after: datetime, limit: int = 100
    ) -> list[Notification]:
        """Records of `kind` Slack never took, made between the two instants, oldest first."""
        stmt = (
            select(Notification)
            .where(
                Notification.kind == kind,
                Notification.delivered_at.is_(None),
                Notification.sent_at < recorded_before,
                Notification.sent_at > recorded_after,
            )
            .order_by(Notification.sent_at, Notification.id)
            .limit(limit)
        )
        with self._store.session() as session:
            return list(session.scalars(stmt))

    def reclaim(self, dedup_key: str, *, recorded_before: datetime) -> bool:
        """Take over an undelivered record made before `recorded_before` (its sender died); True for
        the one caller that does, who sends it again. A younger record may still be in flight."""
        stmt = (
            update(Notification)
            .where(
                Notification.dedup_key == dedup_key,
                Notification.delivered_at.is_(None),
                Notification.sent_at < recorded_before,
            )
            .values(sent_at=self._store.now())
            .execution_options(synchronize_session=False)
        )
        with self._store.session() as session:
            return cast(CursorResult[Any], session.execute(stmt)).rowcount == 1

    def forget(self, dedup_key: str) -> bool:
        """Drop a record whose send failed, so the message is tried again; False if there was none."""
        stmt = delete(Notification).where(Notification.dedup_key == dedup_key)
        with self._store.session() as session:
            return cast(CursorResult[Any], session.execute(stmt)).rowcount == 1
