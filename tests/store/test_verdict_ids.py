"""A verdict's full lists on both dialects: replaced whole, paged in the job's order, streamed."""

from __future__ import annotations

from daemon.core.reconcile import IdList
from store import Store


def _run(store: Store) -> str:
    return store.runs.create(kind="replay", source="orders", topic="t", tps=5, requester="U1").id


def test_lists_page_in_the_jobs_order_and_a_new_verdict_replaces_them(store: Store) -> None:
    run_id, other = _run(store), _run(store)
    # the job's order is bytewise ("B" before "a"), which a collation would not keep
    missing = [(f"e-{n:05}", 0) for n in range(250)] + [("B", 0), ("a", 0)]
    store.verdict_ids.replace(run_id, {IdList.MISSING: missing, IdList.DUPLICATED: [("e-7", 3)]})
    store.verdict_ids.replace(other, {IdList.UNEXPECTED: [("x-1", 1)]})

    assert store.verdict_ids.counts(run_id) == {
        IdList.MISSING: 252,
        IdList.UNEXPECTED: 0,
        IdList.DUPLICATED: 1,
    }
    pages, after = [], -1
    while page := store.verdict_ids.page(run_id, IdList.MISSING, after=after, limit=100):
        pages.append(page)
        after = page[-1].n
    assert [len(page) for page in pages] == [100, 100, 52]
    assert [(row.event_id, row.copies) for page in pages for row in page] == missing
    assert [
        (r.event_id, r.copies) for r in store.verdict_ids.each(run_id, IdList.MISSING, chunk=7)
    ] == missing
    assert [(r.event_id, r.copies) for r in store.verdict_ids.page(run_id, IdList.DUPLICATED)] == [("e-7", 3)]

    store.verdict_ids.replace(run_id, {IdList.MISSING: [], IdList.UNEXPECTED: [("x-9", 2)]})
    assert store.verdict_ids.counts(run_id) == {IdList.MISSING: 0, IdList.UNEXPECTED: 1, IdList.DUPLICATED: 0}
    assert store.verdict_ids.counts(other)[IdList.UNEXPECTED] == 1  # another run's lists are its own
