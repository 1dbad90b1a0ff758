"""A Spark standalone cluster on loopback: one master and N workers, from the installed pyspark.

    scripts/local-spark-cluster start|stop|status [--state-dir DIR] [--workers 2] [--cores 1] [--fresh]

The master and worker classes ship in pyspark's own jars (``org.apache.spark.deploy.master.Master``,
``...deploy.worker.Worker``), started through its ``bin/spark-class`` as Spark's ``sbin`` scripts
would, each in its own process group so a stop takes the executors the worker started with it.
``start`` returns once the master lists every worker alive and prints ``master=spark://…`` (and the
master's web UI). Everything binds to 127.0.0.1; state, logs and the workers' directories live in
the state dir (default ``.state/spark-cluster``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"
DEFAULT_STATE_DIR = Path(".state/spark-cluster")
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0
DAEMON_MEMORY = "256m"  # the master's and workers' own heaps (their executors get what a job asks)
WORKER_MEMORY = "2g"  # what each worker may give its executors


class ClusterError(RuntimeError):
    """The cluster did not start or stop; the message says why (with a log's tail)."""


@dataclass(frozen=True)
class Cluster:
    master: str  # spark://127.0.0.1:PORT
    ui: str  # the master's web UI (its /json/ lists the workers)
    workers: int


def _say(message: str) -> None:
    print(f"local-spark-cluster: {message}", file=sys.stderr, flush=True)


def spark_home() -> Path:
    """The installed pyspark: its jars hold the master and worker, its bin/ the launcher."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _environment(state_dir: Path) -> dict[str, str]:
    home = spark_home()
    return {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOCAL_HOSTNAME": HOST,
        "SPARK_LOG_DIR": str(state_dir),
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "PYSPARK_PYTHON": sys.executable,  # executors' Python workers: this environment's
    }


def _spawn(state_dir: Path, name: str, arguments: list[str]) -> int:
    log = (state_dir / f"{name}.log").open("ab")
    process = subprocess.Popen(
        [str(spark_home() / "bin" / "spark-class"), *arguments],
        env=_environment(state_dir),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # its own group: a stop takes its executors too
    )
    (state_dir / f"{name}.pid").write_text(f"{process.pid}\n")
    return process.pid


def _pids(state_dir: Path) -> dict[str, int]:
    found = {}
    for path in sorted(state_dir.glob("*.pid")):
        with contextlib.suppress(OSError, ValueError):
            found[path.stem] = int(path.read_text().split()[0])
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True


def _tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


def master_state(ui: str) -> dict[str, object] | None:
    """The master's own view (``/json/``), or None while it does not answer."""
    try:
        with urllib.request.urlopen(f"{ui}/json/", timeout=2) as answer:  # noqa: S310 (loopback http)
            state: dict[str, object] = json.load(answer)
            return state
    except (OSError, ValueError):
        return None


def alive_workers(ui: str) -> int:
    state = master_state(ui)
    workers = state.get("workers") if state is not None else None
    if not isinstance(workers, list):
        return 0
    return sum(1 for worker in workers if isinstance(worker, dict) and worker.get("state") == "ALIVE")


def start(
    state_dir: Path = DEFAULT_STATE_DIR,
    *,
    workers: int = 2,
    cores: int = 1,
    fresh: bool = False,
    timeout_s: float = START_TIMEOUT_S,
) -> Cluster:
    """Start the master and ``workers`` workers of ``cores`` cores each (or find them running)."""
    if fresh:
        stop(state_dir)
        shutil.rmtree(state_dir, ignore_errors=True)
    running = status(state_dir)
    if running is not None:
        return running
    stop(state_dir)  # a partial cluster from before: nothing half-started stays
    state_dir.mkdir(parents=True, exist_ok=True)
    port, ui_port = _free_port(), _free_port()
    master, ui = f"spark://{HOST}:{port}", f"http://{HOST}:{ui_port}"
    master_args = ["org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(port)]
    _spawn(state_dir, "master", [*master_args, "--webui-port", str(ui_port)])
    for n in range(1, workers + 1):
        work = state_dir / f"worker-{n}"
        work.mkdir(exist_ok=True)
        worker_args = ["org.apache.spark.deploy.worker.Worker", "--host", HOST, "--cores", str(cores)]
        worker_args += ["--memory", WORKER_MEMORY, "--webui-port", str(_free_port()), "--work-dir", str(work)]
        _spawn(state_dir, f"worker-{n}", [*worker_args, master])
    deadline = time.monotonic() + timeout_s
    while alive_workers(ui) < workers:
        dead = [name for name, pid in _pids(state_dir).items() if not _alive(pid)]
        if dead or time.monotonic() > deadline:
            why = f"{', '.join(dead)} exited" if dead else f"not every worker registered in {timeout_s:.0f} s"
            log = state_dir / f"{dead[0] if dead else 'master'}.log"
            stop(state_dir)
            raise ClusterError(f"the cluster did not start: {why}\n{_tail(log)}")
        time.sleep(0.3)
    cluster = Cluster(master=master, ui=ui, workers=workers)
    (state_dir / "cluster.json").write_text(json.dumps(cluster.__dict__))
    return cluster


def status(state_dir: Path = DEFAULT_STATE_DIR) -> Cluster | None:
    """The running cluster (every process alive, the master listing its workers), else None."""
    recorded = state_dir / "cluster.json"
    if not recorded.exists():
        return None
    try:
        cluster = Cluster(**json.loads(recorded.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    pids = _pids(state_dir)
    if len(pids) != cluster.workers + 1 or not all(map(_alive, pids.values())):
        return None
    return cluster if alive_workers(cluster.ui) == cluster.workers else None


def stop(state_dir: Path = DEFAULT_STATE_DIR, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop every process group the state dir names (workers first, with their executors)."""
    pids = _pids(state_dir)
    order = sorted(pids, key=lambda name: name == "master")  # the master last
    for name in order:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pids[name], signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(_alive(pid) for pid in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    for name, pid in pids.items():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        (state_dir / f"{name}.pid").unlink(missing_ok=True)
    (state_dir / "cluster.json").unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="local-spark-cluster", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    parser.add_argument("--workers", type=int, default=2, help="start: how many workers (default 2)")
    parser.add_argument("--cores", type=int, default=1, help="start: cores per worker (default 1)")
    parser.add_argument("--fresh", action="store_true", help="start: stop and wipe this state dir first")
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            _say(f"starting a master and {args.workers} worker(s) of {args.cores} core(s) on {HOST}")
            cluster = start(args.state_dir, workers=args.workers, cores=args.cores, fresh=args.fresh)
            print(f"ui={cluster.ui}")
            print(f"master={cluster.master}", flush=True)
        elif args.command == "stop":
            stop(args.state_dir)
        else:
            running = status(args.state_dir)
            print(
                "stopped"
                if running is None
                else f"running workers={running.workers}\nmaster={running.master}"
            )
    except ClusterError as exc:
        print(f"local-spark-cluster: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
