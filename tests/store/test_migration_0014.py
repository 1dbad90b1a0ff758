"""Migration 0014 on both dialects: a run's three renamed facts keep their values, and the step goes
down again with the old names. Read with SQL, not the models, so a later column does not break it."""

from __future__ import annotations

from sqlalchemy import text

from store.db import create_store_engine
from store.migrate import current_revision, downgrade, upgrade

INSERT = text(
    "INSERT INTO runs (id, kind, source, target_topic, topic_created, tps, options, requester, state,"
    " confirmed_count, failed_tasks, duplicates_reported, launcher_kind, created_at, updated_at, version)"
    " VALUES (:id, 'replay', 's', :topic, false, 1, '{\"v\": 1}', 'U1', 'succeeded', :confirmed, 0,"
    " :duplicates, 'local', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, 1)"
)
ROWS = [
    {"id": "r-00000000000a", "topic": "replay.orders.r-00000000000a", "confirmed": 597, "duplicates": 3},
    {"id": "r-00000000000b", "topic": "orders.live", "confirmed": 0, "duplicates": None},  # not measured
]


def test_the_renamed_facts_keep_their_values_up_and_down(database_url: str) -> None:
    upgrade(database_url, "0013")
    engine = create_store_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.execute(INSERT, ROWS)
        upgrade(database_url, "0014")
        with engine.connect() as conn:
            after = conn.execute(text("SELECT id, topic, confirmed, duplicates FROM runs ORDER BY id")).all()
        assert [tuple(row) for row in after] == [
            (r["id"], r["topic"], r["confirmed"], r["duplicates"]) for r in ROWS
        ]
        downgrade(database_url, "0013")
        assert current_revision(database_url) == "0013"
        with engine.connect() as conn:
            back = conn.execute(
                text("SELECT id, target_topic, confirmed_count, duplicates_reported FROM runs ORDER BY id")
            ).all()
        assert [tuple(row) for row in back] == [tuple(row) for row in after]
    finally:
        engine.dispose()
