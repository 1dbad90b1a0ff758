"""Migration 0016 on both dialects: every unfinished run gets its own control key, a finished run
none (its job is gone); a run created after it gets one from the store. Read with SQL, not the models."""

from __future__ import annotations

import re

from sqlalchemy import text

from store import Store
from store.db import create_store_engine
from store.migrate import current_revision, downgrade, upgrade

INSERT = text(
    "INSERT INTO runs (id, kind, source, topic, topic_created, tps, options, requester, state,"
    " confirmed, failed_tasks, launcher_kind, created_at, updated_at, version)"
    " VALUES (:id, 'replay', 's', 't', false, 1, '{\"v\": 1}', 'U1', :state, 0, 0,"
    " 'local', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 1)"
)
KEYS = "SELECT id, control_key FROM runs ORDER BY id"


def test_unfinished_runs_get_a_key_each_and_new_runs_get_one_from_the_store(database_url: str) -> None:
    upgrade(database_url, "0015")
    engine = create_store_engine(database_url)
    try:
        states = {"r-00000000000a": "running", "r-00000000000b": "queued", "r-00000000000c": "succeeded"}
        with engine.begin() as conn:
            for run_id, state in states.items():
                conn.execute(INSERT, {"id": run_id, "state": state})
        upgrade(database_url, "0016")
        with engine.connect() as conn:
            keys: dict[str, str | None] = {row[0]: row[1] for row in conn.execute(text(KEYS)).all()}
        assert keys["r-00000000000c"] is None
        running, queued = keys["r-00000000000a"], keys["r-00000000000b"]
        assert running is not None and re.fullmatch(r"[0-9a-f]{64}", running)
        assert queued is not None and re.fullmatch(r"[0-9a-f]{64}", queued)
        assert running != queued

        upgrade(database_url)  # whatever follows keeps them
        with Store(database_url) as store:
            made = store.runs.create(kind="replay", source="s", topic="t", tps=1, requester="U1")
            fresh = store.runs.get(made.id).control_key
            other = store.runs.create(kind="replay", source="s", topic="t", tps=1, requester="U1").id
            assert fresh is not None and re.fullmatch(r"[0-9a-f]{64}", fresh)
            assert store.runs.get(other).control_key != fresh

        downgrade(database_url, "0015")
        assert current_revision(database_url) == "0015"
    finally:
        engine.dispose()
