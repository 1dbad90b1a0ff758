"""On a cluster, wait for the executors the job asked for before counting its slots.

The throttle divides T by slots = executors x cores (``spark_job.publish.slots``). A cluster grants
executors some seconds after the driver starts, and may grant fewer than asked (no free cores): a
job that counted slots from its request before they existed would start its tasks on whatever had
registered and miss its rate. So a job on a cluster master waits until every executor it asked for
(``spark.executor.instances``) has registered, at most ``spark.replay.executorWaitSeconds``, and
fails naming the cluster and what it gave when they do not all come; nothing is read or sent before.
Only a job the Spark-cluster launcher started sets that wait (EMR Serverless sizes its applications
itself, ADR 0050); local masters have no executors to wait for.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from pyspark import SparkContext

from spark_job.errors import SlotsError

WAIT_CONF = "spark.replay.executorWaitSeconds"
POLL_S = 0.25
CONNECT_S = 5.0


def check_master(master: str, *, timeout_s: float = CONNECT_S) -> None:
    """A standalone master (``spark://host:port``, several for a standby pair) that no address answers
    fails the run at once, naming it: Spark itself tries for a minute, then says only that its
    context stopped. Other masters (local, k8s://, yarn) are not probed here."""
    if not master.startswith("spark://"):
        return
    problems = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                return
        except (OSError, ValueError) as exc:
            problems.append(f"{address}: {exc}")
    raise SlotsError(
        f"the Spark master {master} does not answer ({'; '.join(problems)}): check REPLAY_SPARK_MASTER "
        "and that the cluster is up, then retry the run"
    )


def registered(context: SparkContext) -> int:
    """Executors registered with the driver now (the driver itself not counted)."""
    ids = context._jsc.sc().getExecutorIds()  # py4j: Spark's own list
    return int(ids.size())


def await_executors(
    context: SparkContext,
    *,
    count: Callable[[SparkContext], int] = registered,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int | None:
    """The executors asked for, once all have registered; None when the job was not asked to wait."""
    master = context.master or ""
    conf = context.getConf()
    asked = int(conf.get("spark.executor.instances", "0") or 0)
    waiting = conf.get(WAIT_CONF)
    if master.startswith("local") or waiting is None or asked < 1:
        return None  # task_slots counts from the configuration (and says what is missing)
    wait_s = float(waiting)
    deadline = clock() + wait_s
    while (have := count(context)) < asked:
        if clock() >= deadline:
            raise SlotsError(
                f"the cluster {master} registered {have} of the {asked} executors this run asked for "
                f"within {wait_s:g} s: free that many executors' cores on it, or ask for fewer workers="
            )
        sleep(POLL_S)
    return asked  # not more: an executor registered beyond them may be released again
