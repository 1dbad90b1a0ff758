"""Notifications are recorded at most once per dedup key; the audit log keeps what happened."""

from __future__ import annotations

import pytest

from daemon.core.errors import NotificationNotFound
from daemon.core.states import Outcome
from store import Store


def test_record_once_is_true_only_the_first_time(store: Store) -> None:
    run = store.runs.create(kind="replay", source="s", topic="t", tps=1, requester="U1")
    key = f"run-finished:{run.id}"
    assert store.notifications.record_once(
        key, channel="C1", kind="run-finished", run_id=run.id, payload={"n": 1}
    )
    assert not store.notifications.record_once(key, channel="C1", kind="run-finished", run_id=run.id)
    note = store.notifications.get(key)
    assert note is not None
    assert (note.run_id, note.payload, note.slack_ts) == (run.id, {"n": 1}, None)
    assert note.sent_at.utcoffset() is not None
    assert store.notifications.get("never-sent") is None


def test_set_ts(store: Store) -> None:
    store.notifications.record_once("k", kind="pipeline-idle")
    store.notifications.set_ts("k", "1700000000.000200")
    note = store.notifications.get("k")
    assert note is not None and note.slack_ts == "1700000000.000200"
    with pytest.raises(NotificationNotFound, match="no notification with dedup key 'missing'"):
        store.notifications.set_ts("missing", "1")


def test_audit_log_newest_first(store: Store) -> None:
    store.audit.append("U1", "replay.create", "r-1", Outcome.ACCEPTED, {"tps": 100})
    store.audit.append("U2", "replay.cancel", "r-1", "refused", {"why": "not the owner"})
    store.audit.append("U1", "pipeline.pause", "p-1")
    entries = store.audit.list()
    assert [e.action for e in entries] == ["pipeline.pause", "replay.cancel", "replay.create"]
    assert entries[1].outcome == "refused" and entries[1].detail == {"why": "not the owner"}
    assert entries[0].outcome == "accepted" and entries[0].at.utcoffset() is not None
    assert [e.action for e in store.audit.list(actor="U1", limit=1)] == ["pipeline.pause"]
    assert len(store.audit.list(target="r-1")) == 2
