"""Alembic environment for the job store.

Called by ``store.migrate`` with an open connection in ``config.attributes["connection"]``;
from the alembic CLI (``alembic -c store/alembic.ini ...``) it connects to
``$REPLAY_DATABASE_URL`` instead. SQLite uses batch mode so later ALTERs work there too.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Connection

from store.db import create_store_engine
from store.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _cli_url() -> str:
    url = os.environ.get("REPLAY_DATABASE_URL") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set REPLAY_DATABASE_URL to the database to migrate")
    return url


def run_offline() -> None:
    """``alembic upgrade --sql``: print the DDL instead of running it."""
    context.configure(url=_cli_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    engine = create_store_engine(_cli_url())
    try:
        with engine.begin() as owned:
            _configure(owned)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
