"""The ``Store`` facade: one engine, a session factory, and the repositories.

Built from a URL (the store then owns and disposes the engine) or from an Engine the caller
owns. SQLite gets WAL, foreign keys, a busy timeout and ``BEGIN IMMEDIATE`` transactions:
taking the write lock up front makes concurrent read-modify-write serialise instead of
failing with "database is locked" when a reader tries to upgrade.

Sessions use ``expire_on_commit=False``: repositories return ORM objects that stay readable
after their session closed (detached snapshots; changing them does not write anything).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Engine, create_engine, event, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from store.audit_log import AuditLog
from store.notification_repository import NotificationRepository
from store.pipeline_repository import PipelineRepository
from store.run_repository import RunRepository
from store.sqltypes import utcnow
from store.verdict_ids import VerdictIds

SQLITE_BUSY_TIMEOUT_MS = 30_000


def normalize_url(url: str | URL) -> URL:
    """Parse ``url``; bare ``postgresql://``/``postgres://`` mean psycopg 3, the driver we ship."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def create_store_engine(url: str | URL, **kwargs: Any) -> Engine:
    """An engine configured the way the store expects (see module docstring)."""
    parsed = normalize_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, pool_pre_ping=True, **kwargs)
    in_memory = parsed.database in (None, "", ":memory:")
    if not in_memory and not parsed.query.get("uri"):
        # The default lives under a state directory that may not exist yet on a fresh clone.
        Path(str(parsed.database)).parent.mkdir(parents=True, exist_ok=True)
    if in_memory:
        # One shared connection, or every checkout would see its own empty database.
        kwargs.setdefault("poolclass", StaticPool)
        kwargs.setdefault("connect_args", {"check_same_thread": False})
    engine = create_engine(parsed, **kwargs)
    _configure_sqlite(engine, wal=not in_memory)
    return engine


def _configure_sqlite(engine: Engine, *, wal: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves, below
        cursor = dbapi_connection.cursor()
        try:
            if wal:
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


class Store:
    """Entry point to the job store; cheap to share between threads."""

    def __init__(
        self,
        url_or_engine: str | URL | Engine,
        *,
        clock: Callable[[], datetime] = utcnow,
        **engine_kwargs: Any,
    ) -> None:
        if isinstance(url_or_engine, Engine):
            if engine_kwargs:
                raise TypeError("engine options only apply when the Store creates the engine from a URL")
            self.engine = url_or_engine
            self._owns_engine = False
        else:
            self.engine = create_store_engine(url_or_engine, **engine_kwargs)
            self._owns_engine = True
        self.clock = clock
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def now(self) -> datetime:
        return self.clock()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on any exception."""
        with self._sessions() as session, session.begin():
            yield session

    def close(self) -> None:
        """Dispose the engine if this store created it; a caller's engine is left alone."""
        if self._owns_engine:
            self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.engine.url.render_as_string(hide_password=True)!r})"

    @cached_property
    def runs(self) -> RunRepository:
        return RunRepository(self)

    @cached_property
    def pipelines(self) -> PipelineRepository:
        return PipelineRepository(self)

    @cached_property
    def notifications(self) -> NotificationRepository:
        return NotificationRepository(self)

    @cached_property
    def audit(self) -> AuditLog:
        return AuditLog(self)

    @cached_property
    def verdict_ids(self) -> VerdictIds:
        return VerdictIds(self)
