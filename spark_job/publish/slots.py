"""How many tasks run at once: the W that the aggregate TPS is divided by (docs/rules.md, rules 6 and 7).

Slots are executors x cores, not executors: an executor with 4 cores runs 4 paced tasks. Local
masters count their threads. With dynamic allocation the count changes under the job's feet, so
the throttle refuses to guess.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from spark_job.errors import SlotsError

_LOCAL = re.compile(r"local\[\s*(\*|\d+)\s*(?:,\s*(\d+)\s*)?\]")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]")


def task_slots(master: str, conf: Mapping[str, str]) -> int:
    """The number of concurrent task slots for ``master`` with Spark configuration ``conf``."""
    master = master.strip()
    if master == "local":
        return 1
    local = _LOCAL.fullmatch(master)
    if local:
        threads = local.group(1)
        count = (os.cpu_count() or 1) if threads == "*" else int(threads)
        if count < 1:
            raise SlotsError(f"master {master!r} has no task threads")
        return count
    cluster = _LOCAL_CLUSTER.fullmatch(master)
    if cluster:
        return int(cluster.group(1)) * int(cluster.group(2))
    if conf.get("spark.dynamicAllocation.enabled", "false").strip().lower() == "true":
        raise SlotsError(
            "dynamic allocation is on; the throttle needs a static executor count: "
            "set spark.dynamicAllocation.enabled=false"
        )
    instances = conf.get("spark.executor.instances")
    if instances is None:
        raise SlotsError(
            "spark.executor.instances is not set; the throttle needs a static executor count "
            f"on master {master!r}"
        )
    executors = _positive("spark.executor.instances", instances)
    cores = _positive("spark.executor.cores", conf.get("spark.executor.cores", "1"))
    cpus_per_task = _positive("spark.task.cpus", conf.get("spark.task.cpus", "1"))
    return executors * max(1, cores // cpus_per_task)


def _positive(key: str, raw: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise SlotsError(f"{key}={raw!r} is not a whole number") from None
    if value < 1:
        raise SlotsError(f"{key}={raw!r} must be >= 1")
    return value


def partition_count(
    rows: int, slots: int, max_multiple: int | None = None, target_rows: int = 1_000_000
) -> int:
    """k x slots partitions: k large enough that no partition holds much more than ``target_rows``.

    A multiple of the slot count gives every slot the same number of partitions (an equal share);
    a bounded partition size keeps a retried task's re-publication (and its memory) small. Each
    further round costs a task launch at its boundary, so partitions are large (k=1 up to a million
    rows per slot).
    """
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    multiple = max(1, -(-rows // (slots * target_rows)))
    if max_multiple is not None:
        multiple = min(multiple, max_multiple)
    return multiple * slots
