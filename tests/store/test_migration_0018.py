"""Migration 0018 on both dialects: a pipeline without a watermark column (one following its table's
commits) is refused before it and kept after it; going down is refused while one exists, and works
once it is gone. Read with SQL, not the models."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from store.db import create_store_engine
from store.migrate import current_revision, downgrade, upgrade

INSERT = text(
    "INSERT INTO pipelines (id, source, schedule, watermark_column, lookback_seconds, tps, topic,"
    " topic_created, options, owners, state, created_by, created_at, updated_at, version)"
    " VALUES (:id, 's', 'every 3600s', :column, 0, 1, 't', false, '{\"v\": 1}', '[]', 'active', 'U1',"
    " CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 1)"
)
COLUMNS = "SELECT id, watermark_column FROM pipelines ORDER BY id"


def test_a_pipeline_without_a_column_is_kept_after_it_and_blocks_going_down(database_url: str) -> None:
    upgrade(database_url, "0017")
    engine = create_store_engine(database_url)
    try:
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(INSERT, {"id": "p-00000000000a", "column": None})
        with engine.begin() as conn:
            conn.execute(INSERT, {"id": "p-00000000000a", "column": "updated_at"})
        upgrade(database_url, "0018")
        with engine.begin() as conn:
            conn.execute(INSERT, {"id": "p-00000000000b", "column": None})
            after = [tuple(row) for row in conn.execute(text(COLUMNS)).all()]
        assert after == [("p-00000000000a", "updated_at"), ("p-00000000000b", None)]

        with pytest.raises(RuntimeError, match="incremental=snapshot"):
            downgrade(database_url, "0017")
        assert current_revision(database_url) == "0018"
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM pipelines WHERE id = 'p-00000000000b'"))
        downgrade(database_url, "0017")
        assert current_revision(database_url) == "0017"
        with engine.connect() as conn:
            assert [tuple(row) for row in conn.execute(text(COLUMNS)).all()] == [
                ("p-00000000000a", "updated_at")
            ]
    finally:
        engine.dispose()
