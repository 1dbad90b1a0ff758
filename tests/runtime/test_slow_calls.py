"""Calls that take seconds are bounded per caller, and a reconcile per person, over real HTTP.

A real daemon on the session's broker: one caller's third lag call while two are waiting for their
second sample is refused at once (429, naming the setting), another caller's goes through, and the
bound lets go when the calls answer. Reconciles read a run's whole window back from its topic, so a
person has one unfinished at a time (admins excepted); the job is a stand-in that waits, so the
reconcile stays unfinished for as long as the test needs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from daemon.contract.models import ReplayBody
from daemon.core.errors import CapReached, Conflict
from daemon.runtime.slow_calls import SlowCalls
from tests.fixtures.daemon import ADMIN, OWNER, DaemonProcess, running_daemon
from tests.fixtures.groups import LAGGING_BY, lagging_group
from tests.fixtures.runs import TERMINAL, wait_for

SAMPLE_S = 4.0


def test_the_bound_is_per_caller_and_in_all_and_lets_go_after_an_error() -> None:
    slow = SlowCalls(per_user=2, total=3)
    with slow.held("U1", "lag"), slow.held("U1", "lag"):
        with pytest.raises(CapReached, match="REPLAY_MAX_SLOW_CALLS_PER_USER=2"), slow.held("U1", "lag"):
            pass
        with slow.held("U2", "lag"):
            with pytest.raises(CapReached, match="REPLAY_MAX_SLOW_CALLS=3"), slow.held("U3", "lag"):
                pass
            assert slow.running() == 3
    with pytest.raises(RuntimeError), slow.held("U1", "lag"):
        raise RuntimeError("the call failed")
    assert slow.running() == 0


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, sample_table: Path, kafka_bootstrap: str
) -> Iterator[DaemonProcess]:
    root = tmp_path_factory.mktemp("slow-calls")
    waiting = root / "waiting-spark-submit"
    waiting.write_text("#!/bin/sh\nexec sleep 300\n")  # a job that never ends by itself
    waiting.chmod(0o700)
    started = running_daemon(
        root,
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        extra={
            "REPLAY_SPARK_SUBMIT": str(waiting),
            "REPLAY_LOCAL_MAX_CONCURRENT_RUNS": "1",
            "REPLAY_LOCAL_STANDBY": "false",  # a sleeping stand-in is no standby driver
        },
    )
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.kafka
def test_a_callers_third_slow_call_is_refused_at_once_and_anothers_goes_through(
    daemon: DaemonProcess, kafka_bootstrap: str
) -> None:
    group, topic = lagging_group(kafka_bootstrap)
    client = daemon.client()

    def lag(user: str) -> tuple[object, float]:
        started = time.monotonic()
        try:
            answer: object = client.group_lag(user, group, topic=topic, sample_s=SAMPLE_S)
        except CapReached as refused:
            answer = refused
        return answer, time.monotonic() - started

    with ThreadPoolExecutor(2) as pool:
        first = [pool.submit(lag, "U0SLOWA01") for _ in range(2)]
        time.sleep(1.0)  # both are waiting for their second sample
        third, third_s = lag("U0SLOWA01")
        other, _ = lag("U0SLOWB01")
        answers = [future.result() for future in first]

    assert isinstance(third, CapReached) and third_s < 1.0, (third, third_s)
    assert "REPLAY_MAX_SLOW_CALLS_PER_USER=2" in str(third)
    assert getattr(other, "total_lag", None) == LAGGING_BY
    assert [getattr(answer, "total_lag", None) for answer, _ in answers] == [LAGGING_BY, LAGGING_BY]
    assert all(seconds >= SAMPLE_S for _, seconds in answers)
    again, _ = lag("U0SLOWA01")  # the two answered: the bound let go of them
    assert getattr(again, "total_lag", None) == LAGGING_BY


@pytest.mark.kafka
def test_one_unfinished_reconcile_per_person_and_a_refusal_creates_nothing(daemon: DaemonProcess) -> None:
    client = daemon.client()
    ended = []
    for day in ("2024-01-02", "2024-01-03"):
        run = client.create_replay(OWNER, ReplayBody(source="orders", window=day, tps=50))
        client.cancel_replay(OWNER, run.id)
        ended.append(wait_for(client, run.id, TERMINAL).id)
    busy = client.create_replay(OWNER, ReplayBody(source="orders", window="2024-01-04", tps=50))
    wait_for(client, busy.id, {"running"})  # holds the one job slot: reconciles stay queued

    try:
        queued = client.reconcile("U0RECON01", ended[0])
        before = {run.id for run in client.list_replays(ADMIN, limit=200).runs}
        with pytest.raises(CapReached, match="REPLAY_MAX_RECONCILES_PER_USER=1"):
            client.reconcile("U0RECON01", ended[1])
        after = {run.id for run in client.list_replays(ADMIN, limit=200).runs}
        by_admin = client.reconcile(ADMIN, ended[1])  # admins are held by the total cap only
        joined = client.reconcile("U0RECON01", ended[0])  # the same run's reconcile is joined, not capped
    finally:  # each unfinished run once; one that ends between the look and the cancel is fine
        for run_id in {busy.id, *(r.id for r in client.list_replays(ADMIN, limit=200).runs)}:
            if client.get_replay(ADMIN, run_id).state not in TERMINAL:
                with contextlib.suppress(Conflict):
                    client.cancel_replay(ADMIN, run_id)

    assert queued.kind == "reconcile" and by_admin.kind == "reconcile"
    assert before == after, "a refused reconcile created a run"
    assert joined.id == queued.id
