"""The byte ceiling (max_mb=): a task's bytes in any second of real time stay within its share, one
record more at most; a record larger than the whole share still goes; a wait for bytes is counted."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_job.publish.byte_budget import WINDOW_S, ByteBudget
from spark_job.publish.publisher import TaskSettings, byte_budget, record_ends
from spark_job.spec.model import EVENT_ID_HEADER


def busiest_window_bytes(sent: list[tuple[float, int]]) -> int:
    """The most bytes handed over in any window ``[a, a + WINDOW_S)``, a at a send."""
    busiest = 0
    for start, _ in sent:
        busiest = max(busiest, sum(size for at, size in sent if start <= at < start + WINDOW_S))
    return busiest


def drive(budget: ByteBudget, sizes: list[int], step_s: float) -> list[tuple[float, int]]:
    """Send ``sizes`` in order as fast as the budget lets, looking every ``step_s``; every record is
    due at once (the byte ceiling is the tighter one)."""
    ends = list(itertools.accumulate(sizes))
    sent: list[tuple[float, int]] = []
    done = 0
    for look in itertools.count():
        if done == len(sizes):
            return sent
        now = look * step_s
        fit = budget.fitting(ends, done, len(sizes) - done, now)
        if fit:
            size = ends[done + fit - 1] - (ends[done - 1] if done else 0)
            budget.spend(size, now)
            sent += [(now, s) for s in sizes[done : done + fit]]
            done += fit
        if done < len(sizes):  # the rest is due and did not fit
            budget.hold(now)
    raise AssertionError("unreachable")


@settings(max_examples=200, deadline=None)
@given(
    share=st.integers(100, 100_000),
    sizes=st.lists(st.integers(1, 20_000), min_size=1, max_size=300),
    step_s=st.sampled_from([0.001, 0.01, 0.05, 0.2]),
)
def test_no_second_holds_more_than_the_share_and_one_record(
    share: int, sizes: list[int], step_s: float
) -> None:
    budget = ByteBudget(share)
    sent = drive(budget, sizes, step_s)

    assert [size for _, size in sent] == sizes  # every record goes, in order
    assert busiest_window_bytes(sent) <= share + max(sizes)
    # over the whole run: no faster than the share (a larger record alone in its window) allows
    windows = (sent[-1][0] - sent[0][0]) / WINDOW_S + 1
    assert sum(sizes) <= max(share, max(sizes)) * windows + max(sizes)


def test_a_record_larger_than_the_share_goes_alone_in_its_window() -> None:
    budget = ByteBudget(1_000)
    sent = drive(budget, [5_000, 5_000, 10], step_s=0.1)

    assert [round(at, 1) for at, _ in sent] == [0.0, 1.0, 2.0]


def test_the_time_due_records_waited_for_bytes_is_counted() -> None:
    budget = ByteBudget(1_000)
    drive(budget, [600, 600, 600], step_s=0.25)  # the second waits a window, the third another

    assert budget.held_s == pytest.approx(2 * WINDOW_S)


def test_nothing_held_when_every_record_fits() -> None:
    budget = ByteBudget(10_000)
    drive(budget, [100] * 50, step_s=0.01)

    assert budget.held_s == 0.0


def test_a_share_must_be_positive() -> None:
    with pytest.raises(ValueError, match="above 0"):
        ByteBudget(0)


def _settings(sizes: list[int], slots: int, max_bytes: int | None, tps: int = 100) -> TaskSettings:
    return TaskSettings(
        run_id="r-1",
        topic="t",
        producer={},
        headers=[("replay-run-id", "r-1"), ("team", "payments")],
        sizes=sizes,
        tps=tps,
        slots=slots,
        t0_wall=0.0,
        progress_topic="p",
        progress_interval_s=1.0,
        max_bytes_per_s=max_bytes,
    )


def test_each_task_keeps_its_rows_share_of_the_bytes_and_the_shares_add_up() -> None:
    sizes = [300, 100, 600, 0]
    budgets = [byte_budget(_settings(sizes, 2, 1_000_000), partition) for partition in range(4)]

    shares = [b.share if b is not None else 0.0 for b in budgets]
    assert shares == [750_000.0, 250_000.0, 1_000_000.0, 0.0]  # rounds (300, 100) and (600, 0)
    assert byte_budget(_settings(sizes, 2, None), 0) is None
    assert byte_budget(_settings(sizes, 2, 1_000_000, tps=0), 0) is None  # unthrottled: no ceiling


def test_a_records_size_is_its_key_value_and_headers() -> None:
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"k1", b"key2"]), pa.array([b"v" * 10, None]), pa.array(["e-1", "e-22"])],
        names=["key", "value", "_replay_event_id"],
    )
    headers = [("replay-run-id", "r-1"), ("team", "payments")]
    fixed = len(EVENT_ID_HEADER) + len("replay-run-id") + len("r-1") + len("team") + len("payments")

    assert record_ends(batch, headers) == [2 + 10 + 3 + fixed, 2 + 10 + 3 + fixed + 4 + 0 + 4 + fixed]
