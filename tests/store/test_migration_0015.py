"""Migration 0015 on both dialects: `runs.confirmed` takes NULL (unknown) after it, values stay; going
down, an unknown count becomes 0 (the old schema cannot say unknown). Read with SQL, not the models."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from store.db import create_store_engine
from store.migrate import current_revision, downgrade, upgrade

INSERT = text(
    "INSERT INTO runs (id, kind, source, topic, topic_created, tps, options, requester, state,"
    " confirmed, failed_tasks, launcher_kind, created_at, updated_at, version)"
    " VALUES (:id, 'replay', 's', 't', false, 1, '{\"v\": 1}', 'U1', 'cancelled', :confirmed, 0,"
    " 'local', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 1)"
)
COUNTS = "SELECT id, confirmed FROM runs ORDER BY id"


def test_an_unknown_count_is_null_after_it_and_zero_before_it(database_url: str) -> None:
    upgrade(database_url, "0014")
    engine = create_store_engine(database_url)
    try:
        with pytest.raises(IntegrityError), engine.begin() as conn:  # before: unknown could not be said
            conn.execute(INSERT, {"id": "r-00000000000a", "confirmed": None})
        with engine.begin() as conn:
            conn.execute(INSERT, {"id": "r-00000000000a", "confirmed": 597})
        upgrade(database_url, "0015")
        with engine.begin() as conn:
            conn.execute(INSERT, {"id": "r-00000000000b", "confirmed": None})
            after = [tuple(row) for row in conn.execute(text(COUNTS)).all()]
        assert after == [("r-00000000000a", 597), ("r-00000000000b", None)]

        downgrade(database_url, "0014")
        assert current_revision(database_url) == "0014"
        with engine.connect() as conn:
            back = [tuple(row) for row in conn.execute(text(COUNTS)).all()]
        assert back == [("r-00000000000a", 597), ("r-00000000000b", 0)]
    finally:
        engine.dispose()
