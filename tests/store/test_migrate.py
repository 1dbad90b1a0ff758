"""The Alembic migration builds exactly the models' schema, on both dialects, down and up again."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect

from store import Store
from store.db import create_store_engine
from store.migrate import current_revision, downgrade, head_revision, upgrade
from store.models import Base

TABLES = {"runs", "run_progress", "pipelines", "notifications", "audit_log", "verdict_ids"}


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def test_upgrade_creates_every_table_at_head(database_url: str) -> None:
    assert current_revision(database_url) is None
    upgrade(database_url)
    assert current_revision(database_url) == head_revision()
    engine = create_store_engine(database_url)
    try:
        assert _tables(engine) == TABLES
    finally:
        engine.dispose()


def test_migrated_schema_matches_the_models(database_url: str) -> None:
    upgrade(database_url)
    engine = create_store_engine(database_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def test_downgrade_then_upgrade_again(database_url: str) -> None:
    upgrade(database_url)
    with Store(database_url) as store:
        store.runs.create(kind="replay", source="lake.orders", topic="t", tps=10, requester="U1")
    downgrade(database_url)
    assert current_revision(database_url) is None
    engine = create_store_engine(database_url)
    try:
        assert _tables(engine) == set()
    finally:
        engine.dispose()
    upgrade(database_url)
    upgrade(database_url)  # idempotent at head
    with Store(database_url) as store:
        assert store.runs.list()[0] == []


def test_upgrade_accepts_an_engine_and_leaves_it_open(database_url: str) -> None:
    engine = create_store_engine(database_url)
    try:
        upgrade(engine)
        store = Store(engine)
        store.close()  # not the store's engine to dispose
        store.runs.create(kind="replay", source="s", topic="t", tps=1, requester="U1")
        assert len(store.runs.list()[0]) == 1
    finally:
        engine.dispose()


def test_plain_postgresql_urls_mean_psycopg() -> None:
    store_engine = create_store_engine("postgresql://u:p@127.0.0.1:1/db")
    try:
        assert store_engine.dialect.driver == "psycopg"
    finally:
        store_engine.dispose()


def test_sqlite_in_memory_and_missing_directories(tmp_path: Path) -> None:
    with Store("sqlite://") as memory:  # one shared connection: every session sees the schema
        upgrade(memory.engine)
        memory.runs.create(kind="replay", source="s", topic="t", tps=1, requester="U1")
        assert len(memory.runs.list()[0]) == 1
    nested = tmp_path / "state" / "deeper" / "replay.db"
    upgrade(f"sqlite:///{nested}")
    assert nested.exists()
    with Store(f"sqlite:///{nested}") as store, store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
