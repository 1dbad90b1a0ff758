"""Before a job on a cluster reads anything: its master answers, and its executors registered."""

from __future__ import annotations

import socket

import pytest

from spark_job.errors import SlotsError
from spark_job.executors import check_master


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # closed again: nothing listens there


def test_a_master_nobody_answers_at_fails_at_once_naming_it() -> None:
    master = f"spark://127.0.0.1:{_closed_port()}"

    with pytest.raises(SlotsError) as raised:
        check_master(master, timeout_s=2)

    assert master in str(raised.value)
    assert "check REPLAY_SPARK_MASTER" in str(raised.value)


def test_a_master_that_listens_passes_and_one_of_a_standby_pair_is_enough() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        check_master(f"spark://127.0.0.1:{port}")
        check_master(f"spark://127.0.0.1:{_closed_port()},127.0.0.1:{port}", timeout_s=2)


@pytest.mark.parametrize("master", ["local[2]", "k8s://https://127.0.0.1:1", "yarn", ""])
def test_other_masters_are_left_to_spark(master: str) -> None:
    check_master(master, timeout_s=0.1)  # no probe, no error: Spark reaches them its own way
