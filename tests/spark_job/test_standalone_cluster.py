"""The loopback Spark standalone cluster (scripts/local-spark-cluster) is a real cluster: a job
submitted to it runs its tasks on two executors, each a JVM of its own under a worker, with Python
workers of their own; and a stop leaves no process of it behind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from scripts.local_spark_cluster import Cluster
from tests.fixtures.spark import SPARK_SUBMIT, spark_environment

pytestmark = pytest.mark.spark

PROBE = """
import json, os
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
context = spark.sparkContext

def where(_):
    worker = os.getpid()
    daemon = os.getppid()  # pyspark's daemon, which the executor's JVM started
    with open(f"/proc/{daemon}/stat") as stat:
        jvm = int(stat.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{jvm}/cmdline", "rb") as cmdline:
        command = cmdline.read().replace(b"\\0", b" ").decode()
    yield {"worker": worker, "jvm": jvm, "command": command}

seen = context.parallelize(range(8), 8).mapPartitions(where).collect()
executors = context._jsc.sc().getExecutorIds().size()
print("PROBE " + json.dumps({"driver": os.getpid(), "seen": seen, "executors": executors}))
"""


def _submit(cluster: Cluster, script: Path) -> dict[str, object]:
    done = subprocess.run(
        [
            SPARK_SUBMIT,
            "--master",
            cluster.master,
            "--conf",
            "spark.executor.cores=1",
            "--conf",
            "spark.cores.max=2",
            "--conf",
            "spark.executor.memory=512m",
            "--conf",
            "spark.ui.enabled=false",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=spark_environment(),
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
    assert lines, "\n".join(line for line in done.stderr.splitlines() if " INFO " not in line)[-3000:]
    answer: dict[str, object] = json.loads(lines[0].removeprefix("PROBE "))
    return answer


def test_a_job_on_the_cluster_runs_on_two_executors_each_a_jvm_of_its_own(
    spark_cluster: Cluster, tmp_path: Path
) -> None:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)

    answer = _submit(spark_cluster, script)

    seen = answer["seen"]
    assert isinstance(seen, list) and len(seen) == 8
    jvms = {row["jvm"] for row in seen}
    assert len(jvms) == 2, seen  # both executors ran tasks
    assert all("CoarseGrainedExecutorBackend" in row["command"] for row in seen)
    assert answer["driver"] not in jvms and all(row["worker"] != answer["driver"] for row in seen)
    assert answer["executors"] == 2


def test_the_script_starts_says_and_stops_a_cluster_leaving_no_process(tmp_path: Path) -> None:
    state_dir = tmp_path / "by-hand"
    script = Path(__file__).resolve().parents[2] / "scripts" / "local-spark-cluster"

    def run(*words: str) -> subprocess.CompletedProcess[str]:
        command = [str(script), *words, "--state-dir", str(state_dir)]
        return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)

    try:
        started = run("start", "--workers", "1")
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip().splitlines()[-1].startswith("master=spark://127.0.0.1:")
        assert run("status").stdout.startswith("running workers=1")
        pids = [int(path.read_text()) for path in state_dir.glob("*.pid")]
        assert len(pids) == 2  # the master and its worker
    finally:
        run("stop")

    assert run("status").stdout.strip() == "stopped"
    assert not list(state_dir.glob("*.pid"))
    assert all(_gone(pid) for pid in pids), pids


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
