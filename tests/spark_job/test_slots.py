"""Task slots: executors x cores on a cluster, threads in local mode, never a guess."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_job.errors import SlotsError
from spark_job.publish.slots import partition_count, task_slots


@given(threads=st.integers(1, 4096), failures=st.none() | st.integers(1, 10))
def test_local_master_counts_its_threads(threads: int, failures: int | None) -> None:
    master = f"local[{threads}]" if failures is None else f"local[{threads},{failures}]"
    assert task_slots(master, {}) == threads


def test_plain_local_is_one_slot() -> None:
    assert task_slots("local", {}) == 1


def test_local_star_uses_every_core() -> None:
    assert task_slots("local[*]", {}) == os.cpu_count()
    assert task_slots("local[*, 3]", {}) == os.cpu_count()


@given(executors=st.integers(1, 500), cores=st.integers(1, 64))
def test_cluster_slots_are_executors_times_cores(executors: int, cores: int) -> None:
    conf = {"spark.executor.instances": str(executors), "spark.executor.cores": str(cores)}
    assert task_slots("yarn", conf) == executors * cores


def test_executor_cores_default_to_one() -> None:
    assert task_slots("spark://host:7077", {"spark.executor.instances": "7"}) == 7


def test_cpus_per_task_divides_cores() -> None:
    conf = {"spark.executor.instances": "2", "spark.executor.cores": "4", "spark.task.cpus": "2"}
    assert task_slots("yarn", conf) == 4


def test_local_cluster_counts_workers_times_cores() -> None:
    assert task_slots("local-cluster[2,3,1024]", {}) == 6


def test_dynamic_allocation_is_refused() -> None:
    conf = {"spark.dynamicAllocation.enabled": "true", "spark.executor.instances": "4"}
    with pytest.raises(SlotsError, match=r"set spark.dynamicAllocation.enabled=false"):
        task_slots("yarn", conf)


def test_cluster_without_a_static_executor_count_is_refused() -> None:
    with pytest.raises(SlotsError, match=r"spark.executor.instances is not set"):
        task_slots("yarn", {})


@pytest.mark.parametrize("value", ["0", "-2", "four"])
def test_bad_executor_counts_are_refused(value: str) -> None:
    with pytest.raises(SlotsError, match=r"spark\.executor\.instances"):
        task_slots("yarn", {"spark.executor.instances": value})


@given(rows=st.integers(0, 10**10), slots=st.integers(1, 512), cap=st.none() | st.integers(1, 64))
def test_partition_count_is_a_multiple_of_the_slots(rows: int, slots: int, cap: int | None) -> None:
    count = partition_count(rows, slots, cap, target_rows=250_000)
    assert count % slots == 0
    assert count >= slots
    if cap is not None:
        assert count <= cap * slots
    else:
        assert rows / count <= 250_000  # no partition needs to hold more than the target


def test_small_windows_use_one_partition_per_slot() -> None:
    assert partition_count(2_100, 8) == 8
