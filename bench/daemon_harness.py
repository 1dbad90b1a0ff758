"""`replayd` as a user runs it, for bench/e2e.py: local launcher, SQLite, the product's defaults.

The daemon gets the same variables `scripts/demo` sets (minus Slack: without a bot token it logs
its notifications), a temporary state dir, and a catalog holding the `orders` source of
examples/sources.yaml pointed at the bench's table. Replays go through the `replay` CLI.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.broker import REPO
from scripts.stray_jobs import stop_jobs

USER = "U0DEMOOWNER"  # an owner of `orders` in examples/sources.yaml
REPLAY_CLI = str(Path(sys.executable).with_name("replay"))
# A figure the job reports about its own memory: a REPLAY_RESULT key, or a log line `peak…mb=N`.
PEAK_LINE = re.compile(r"\bpeak[a-z_]*mb[=:]\s*([0-9]+(?:\.[0-9]+)?)", re.IGNORECASE)


@dataclass
class Daemon:
    pid: int
    url: str
    env: dict[str, str]  # what the `replay` CLI needs to reach it
    state_dir: Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def write_catalog(state_dir: Path, table: Path, lake: dict[str, Path] | None = None) -> Path:
    """examples/sources.yaml's `orders`, reading `table`; its email column is not encrypted here.
    `lake` adds `orders-<format>` for each Iceberg or Delta copy of the table (by format)."""
    catalog = yaml.safe_load((REPO / "examples" / "sources.yaml").read_text())
    orders = catalog["sources"]["orders"]
    orders["table"]["path"] = str(table)
    orders.pop("encrypted_columns", None)
    sources = {"orders": orders}
    for table_format, path in (lake or {}).items():
        sources[f"orders-{table_format}"] = {
            **orders,
            "table": {"path": str(path), "format": table_format},
            "watermark_column": None,
        }
    path = state_dir / "sources.yaml"
    path.write_text(yaml.safe_dump({"sources": sources}, sort_keys=False))
    return path


@contextlib.contextmanager
def replayd(
    state_dir: Path,
    bootstrap: str,
    table: Path,
    *,
    max_tps: int | None = None,
    lake: dict[str, Path] | None = None,
    jars: list[Path] | None = None,
    standby: bool = True,
    producer: str | None = None,
    extra: dict[str, str] | None = None,
) -> Iterator[Daemon]:
    """`python -m daemon.runtime.server` on a free port until the block ends (with `lake`, its copies
    of the table as sources too, read with `jars`; `standby=False`: no standby driver, every run cold;
    `producer`: REPLAY_KAFKA_PRODUCER, the jobs' producer tuning as JSON; `extra`: more settings, such
    as another launcher's)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    token = secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLAY_")}
    env.update(
        {
            "REPLAY_STATE_DIR": str(state_dir),
            "REPLAY_KAFKA_BOOTSTRAP": bootstrap,
            "REPLAY_CATALOG_PATH": str(write_catalog(state_dir, table, lake)),
            "REPLAY_API_TOKEN": token,
            "REPLAY_DAEMON_PORT": str(port),
            "REPLAY_DAEMON_URL": url,
            "REPLAY_USER": USER,
        }
    )
    if max_tps is not None:
        env["REPLAY_MAX_TPS"] = str(max_tps)
    if jars:
        env["REPLAY_LOCAL_JARS"] = ",".join(str(jar) for jar in jars)
    if not standby:
        env["REPLAY_LOCAL_STANDBY"] = "false"
    if producer is not None:
        env["REPLAY_KAFKA_PRODUCER"] = producer
    env.update(extra or {})
    with (state_dir / "replayd.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "daemon.runtime.server"], cwd=REPO, env=env, stdout=log, stderr=log
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                tail = (state_dir / "replayd.log").read_text(errors="replace")[-3000:]
                raise SystemExit(f"replayd did not start:\n{tail}")
            time.sleep(0.2)
        yield Daemon(process.pid, url, env, state_dir)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        stop_jobs(state_dir / "runs")  # a local job outlives its daemon by design: not the bench's


def wait_for_standby(daemon: Daemon, timeout_s: float = 120.0) -> tuple[float, float]:
    """Wait until the daemon's local launcher has a standby driver ready (what a person finds on an idle
    daemon); the seconds waited and the idle standby's RSS (its whole process session), in MB."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        for directory in (daemon.state_dir / "standby").glob("s-*"):
            if (directory / "ready").exists() and not (directory / "claim").exists():
                time.sleep(1.0)  # settled: its warm-up job is done
                pid = int((directory / "pid").read_text().split()[0])
                return time.monotonic() - began, _session_rss_kb(pid) / 1024
        time.sleep(0.1)
    raise SystemExit(f"no standby driver got ready within {timeout_s:.0f} s")


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS (now) and VmHWM (the peak so far) of one process, in MB."""
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return found


def replay_cli(daemon: Daemon, *words: str) -> tuple[list[dict[str, Any]], str]:
    """Run `replay WORDS --json`; its JSON answers (one per line) and its stderr."""
    done = subprocess.run(
        [REPLAY_CLI, *words, "--json"], cwd=REPO, env=daemon.env, capture_output=True, text=True, check=False
    )
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not answers:
        raise SystemExit(f"replay {' '.join(words)}: exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    return answers, done.stderr


def session_pids(session: int) -> list[tuple[int, str]]:
    """Every process in one session (the launcher starts each job in its own), with its command line."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            text = stat.read_text()
            if int(text[text.rindex(")") + 2 :].split()[3]) == session:
                command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append((int(stat.parent.name), command))
    return found


def session_of(run_dir: Path) -> int | None:
    """The session of a run's job, from the pid file its launcher writes; None until it is there."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((run_dir / "pid").read_text().split()[0])
    return None


def _session_rss_kb(session: int) -> int:
    """Summed VmRSS of every process in one session."""
    total = 0
    for pid, _ in session_pids(session):
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


class JobMemory:
    """Samples the job's processes (spark-submit's JVM and its Python workers) twice a second."""

    def __init__(self, runs_dir: Path) -> None:
        self._runs_dir = runs_dir
        self._run_id: str | None = None
        self._stop = threading.Event()
        self.peak_kb = 0
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def watch(self, run_id: str) -> None:
        self._run_id = run_id
        self._thread.start()

    def _sample(self) -> None:
        session: int | None = None
        while not self._stop.wait(0.5):
            if session is None:
                session = session_of(self._runs_dir / str(self._run_id))
                continue
            self.peak_kb = max(self.peak_kb, _session_rss_kb(session))

    def stop(self) -> float | None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        return self.peak_kb / 1024 if self.peak_kb else None


def job_peak_mb(run_dir: Path) -> str:
    """The peak memory the job itself logged or reported, if it does; else ``unknown``."""
    for name in ("result.json", "stdout.log", "stderr.log"):
        path = run_dir / name
        if not path.exists():
            continue
        text = path.read_text(errors="replace")
        if name == "result.json":
            with contextlib.suppress(ValueError, AttributeError):
                result = json.loads(text)
                for key, value in result.items():
                    if "peak" in key and key.endswith("mb") and isinstance(value, int | float):
                        return f"{value:.0f}"
        if match := PEAK_LINE.search(text):
            return f"{float(match.group(1)):.0f}"
    return "unknown"
