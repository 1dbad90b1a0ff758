"""Run the store's Alembic migrations from code: no alembic.ini or working directory needed.

The scripts live inside the package (``store/migrations``), so an installed wheel can
migrate its own database: ``store.migrate.upgrade(url_or_engine)``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import URL, Connection, Engine

from store.db import create_store_engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic Config for the packaged scripts, optionally bound to an open connection."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        # env.py uses this connection instead of building an engine from a URL.
        config.attributes["connection"] = connection
    return config


def _with_connection(url_or_engine: str | URL | Engine, action: Callable[[Connection], None]) -> None:
    engine = url_or_engine if isinstance(url_or_engine, Engine) else create_store_engine(url_or_engine)
    try:
        with engine.begin() as connection:
            action(connection)
    finally:
        if engine is not url_or_engine:
            engine.dispose()


def upgrade(url_or_engine: str | URL | Engine, revision: str = "head") -> None:
    """Bring the schema up to ``revision`` (default: latest). Idempotent."""
    _with_connection(url_or_engine, lambda conn: command.upgrade(alembic_config(conn), revision))


def downgrade(url_or_engine: str | URL | Engine, revision: str = "base") -> None:
    """Roll the schema back to ``revision`` (default: empty). Destroys data; for tests and rollbacks."""
    _with_connection(url_or_engine, lambda conn: command.downgrade(alembic_config(conn), revision))


def current_revision(url_or_engine: str | URL | Engine) -> str | None:
    """The revision the database is at, or None if it was never migrated."""
    found: list[str | None] = []
    _with_connection(
        url_or_engine, lambda conn: found.append(MigrationContext.configure(conn).get_current_revision())
    )
    return found[0]


def head_revision() -> str:
    """The newest revision shipped with this code."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found under {MIGRATIONS_DIR}")
    return head
