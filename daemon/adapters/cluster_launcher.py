"""`ClusterSparkLauncher`: the job under `spark-submit --master <cluster>` (standalone, Kubernetes, YARN).

The driver runs here in client mode, exactly as a local job's does (its own process session, a pid
file, the run's lock, logs under the run's directory), so watching, cancelling, re-attaching after a
restart and failure reasons are the local launcher's; only its executors run on the cluster. A run's
``workers`` is its executor count, each of ``executor_cores`` cores (or the source's catalog
``executor`` size, carried in the spec), allocated statically (dynamic allocation off): the job waits
until every one of them has registered before it counts its slots (``spark_job.executors``), and
fails naming the cluster when they do not come.

The driver ships the job's code to the executors itself (``spark_job.main``). They run
``executor_python`` (default: this interpreter's path, which must then exist on every node), which
needs the job's dependencies (``kafka-replay[job]``). Admission is the local launcher's cap
(``REPLAY_LOCAL_MAX_CONCURRENT_RUNS``): size it to what the cluster holds. No standby driver: an
idle one would hold the cluster's executors (ADR 0056).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from daemon.adapters.local_launcher import JOB_ENTRY, LocalSparkLauncher
from daemon.adapters.spark_class_archive import DRIVER_JAVA_OPTIONS
from spark_job.main import PACKAGE_DIR_CONF

# read by spark_job.executors (WAIT_CONF), which the daemon does not import: it imports pyspark
EXECUTOR_WAIT_CONF = "spark.replay.executorWaitSeconds"


def _executor_size(spec_path: Path) -> dict[str, Any]:
    """The spec's ``executor`` section (the source's size, from the catalog), or nothing."""
    section = json.loads(spec_path.read_text()).get("executor")
    return section if isinstance(section, dict) else {}


class ClusterSparkLauncher(LocalSparkLauncher):
    kind = "spark"

    def __init__(
        self,
        *,
        master: str,
        executor_cores: int = 1,
        executor_memory: str = "1g",
        executor_wait_s: float = 120.0,
        executor_python: str | None = None,
        **local: Any,
    ) -> None:
        super().__init__(standby_workers=None, class_archive=local.pop("class_archive", None), **local)
        self.master = master
        self._executor_cores = executor_cores
        self._executor_memory = executor_memory
        self._executor_wait_s = executor_wait_s
        self._executor_python = executor_python or sys.executable

    def submit_command(self, run_id: str, spec_path: Path, *, workers: int) -> list[str]:
        """`workers` executors of `executor_cores` cores each (or the source's own size, the spec's
        ``executor``), held for the whole run."""
        options = self._class_archive.java_options() if self._class_archive else DRIVER_JAVA_OPTIONS
        size = _executor_size(spec_path)
        cores = int(size.get("cores", self._executor_cores))
        conf = {
            "spark.driver.extraJavaOptions": options,
            "spark.executor.instances": str(workers),
            "spark.executor.cores": str(cores),
            "spark.cores.max": str(workers * cores),  # standalone: this many, no more
            "spark.executor.memory": str(size.get("memory", self._executor_memory)),
            "spark.dynamicAllocation.enabled": "false",
            "spark.pyspark.driver.python": sys.executable,  # the driver runs here
            "spark.pyspark.python": self._executor_python,  # the executors on the cluster's nodes
            "spark.task.maxFailures": str(self._task_retries + 1),
            "spark.speculation": "false",
            "spark.ui.enabled": "false",
            EXECUTOR_WAIT_CONF: f"{self._executor_wait_s:g}",
            PACKAGE_DIR_CONF: str(self.package_dir),
            **self._extra_conf,
        }
        jars = ["--jars", ",".join(str(jar) for jar in self._jars)] if self._jars else []
        return [
            self._spark_submit,
            "--master",
            self.master,
            "--deploy-mode",
            "client",
            "--name",
            f"replay-{run_id}",
            *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")],
            *jars,
            str(JOB_ENTRY),
            str(spec_path),
        ]
