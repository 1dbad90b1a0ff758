"""The Spark-cluster launcher's `spark-submit`: the settings' executor size, or the source's own from the
spec (the standalone cluster in the tests has one-core workers, so only here can a source's cores be
seen to reach the command)."""

from __future__ import annotations

import json
from pathlib import Path

from daemon.adapters.cluster_launcher import EXECUTOR_WAIT_CONF, ClusterSparkLauncher
from spark_job.executors import WAIT_CONF


def _conf(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def _launcher(tmp_path: Path) -> ClusterSparkLauncher:
    return ClusterSparkLauncher(
        master="spark://127.0.0.1:7077",
        executor_cores=1,
        executor_memory="512m",
        runs_dir=tmp_path / "runs",
        class_archive=None,
    )


def test_a_sources_executor_size_from_the_spec_sizes_the_submit(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"run_id": "r-1", "executor": {"cores": 3, "memory": "6g"}}))

    conf = _conf(_launcher(tmp_path).submit_command("r-1", spec, workers=2))

    assert (conf["spark.executor.instances"], conf["spark.executor.cores"]) == ("2", "3")
    assert (conf["spark.cores.max"], conf["spark.executor.memory"]) == ("6", "6g")


def test_without_one_the_settings_size_it(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"run_id": "r-1"}))

    conf = _conf(_launcher(tmp_path).submit_command("r-1", spec, workers=2))

    assert (conf["spark.executor.cores"], conf["spark.cores.max"], conf["spark.executor.memory"]) == (
        "1",
        "2",
        "512m",
    )


def test_the_executor_wait_is_set_under_the_name_the_job_reads() -> None:
    """The daemon spells the conf itself (importing the job's module would import pyspark)."""
    assert EXECUTOR_WAIT_CONF == WAIT_CONF
