"""Migration 0011 on both dialects: runs that ended before it count as released (their pending
releases lived in a daemon's memory and cannot be told apart now), unfinished ones are still to
release when they end, and the step goes down again cleanly. Read with SQL, not the models, so a
later column does not break it."""

from __future__ import annotations

from sqlalchemy import text

from store.db import create_store_engine
from store.migrate import current_revision, downgrade, upgrade

INSERT = text(
    "INSERT INTO runs (id, kind, source, target_topic, topic_created, tps, options, requester, state,"
    " confirmed_count, failed_tasks, launcher_kind, created_at, updated_at, ended_at, version)"
    " VALUES (:id, 'replay', 's', 't', false, 1, '{}', 'U1', :state, 0, 0, 'local',"
    " CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, :ended, 1)"
)


def test_runs_that_ended_before_0011_count_as_released(database_url: str) -> None:
    upgrade(database_url, "0010")
    engine = create_store_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                INSERT, {"id": "r-00000000000a", "state": "succeeded", "ended": "2024-10-01 10:00:00"}
            )
            conn.execute(INSERT, {"id": "r-00000000000b", "state": "cancelled", "ended": None})
            conn.execute(INSERT, {"id": "r-00000000000c", "state": "running", "ended": None})
        upgrade(database_url, "0011")
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, released_at FROM runs ORDER BY id")).all()
        released = {run_id: at is not None for run_id, at in rows}
        assert released == {"r-00000000000a": True, "r-00000000000b": True, "r-00000000000c": False}
        downgrade(database_url, "0010")
        assert current_revision(database_url) == "0010"
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM runs")).scalar_one() == 3
    finally:
        engine.dispose()
