"""What a real local job can see of the daemon's secrets, and what its run leaves on disk.

`replayd` runs with a Slack bot token, an API token, user tokens and a database URL in its environment;
its Spark job (the spark-submit JVM, the Python driver and its workers) must inherit none of them, its
spec (the Kafka password's home) must be readable by the daemon's user only, and gone once the run ended.
"""

from __future__ import annotations

import stat
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from daemon.contract.models import ReplayBody
from scripts.devtools.slack_standin import SlackStandin
from tests.fixtures.daemon import OWNER, running_daemon
from tests.fixtures.runs import TERMINAL, wait_for
from tests.fixtures.slack import BOT_TOKEN

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SECRET_NAMES = ("REPLAY_SLACK_BOT_TOKEN", "REPLAY_API_TOKEN", "REPLAY_USER_TOKENS", "REPLAY_DATABASE_URL")
JOB_START_S = 120.0


@dataclass(frozen=True)
class JobProcess:
    pid: int
    command: list[str]
    environ: dict[str, str]


def _session(sid: int) -> list[JobProcess]:
    """Every live process of the job's session (the launcher starts each job in its own)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            status = (proc / "stat").read_text()
            if int(status[status.rindex(")") + 2 :].split()[3]) != sid:
                continue
            command = [part.decode() for part in (proc / "cmdline").read_bytes().split(b"\0") if part]
            raw = (proc / "environ").read_bytes()
        except (OSError, ValueError):
            continue  # gone meanwhile
        if command and raw:  # neither is readable for a moment around an exec
            entries = (entry.decode(errors="replace").partition("=") for entry in raw.split(b"\0") if entry)
            found.append(JobProcess(int(proc.name), command, {name: value for name, _, value in entries}))
    return found


def _jvm_and_driver(run_dir: Path) -> tuple[JobProcess, JobProcess]:
    """The spark-submit JVM and the Python driver it started, once both run."""
    deadline = time.monotonic() + JOB_START_S
    while time.monotonic() < deadline:
        pid_file = run_dir / "pid"
        if pid_file.exists():
            processes = _session(int(pid_file.read_text().split()[0]))
            jvms = [p for p in processes if Path(p.command[0]).name == "java"]
            drivers = [  # the job's entry point: cold, `main.py <spec>`; a standby, `main.py --standby …`
                p
                for p in processes
                if "python" in Path(p.command[0]).name and any(arg.endswith("main.py") for arg in p.command)
            ]
            if jvms and drivers:
                return jvms[0], drivers[0]
        time.sleep(0.2)
    raise AssertionError(f"no JVM and Python driver in the job's session within {JOB_START_S}s")


def _modes(run_dir: Path) -> dict[str, int]:
    return {path.name: stat.S_IMODE(path.stat().st_mode) for path in [run_dir, *run_dir.iterdir()]}


def test_a_local_job_inherits_no_daemon_secret_and_its_spec_is_private_then_deleted(
    tmp_path: Path, sample_table: Path, kafka_bootstrap: str, slack: SlackStandin
) -> None:
    daemon = running_daemon(
        tmp_path,
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        database_url=f"sqlite:///{tmp_path / 'store-with-a-secret-name.db'}",
        extra={"REPLAY_SLACK_BOT_TOKEN": BOT_TOKEN, "REPLAY_SLACK_API_URL": slack.base_url},
        standby=True,  # a standby driver's environment is checked too
    )
    secrets = {name: daemon.env[name] for name in SECRET_NAMES}
    try:
        with daemon.client() as client:
            # The JVM and the driver are looked at during Spark's start-up: the sending need not be slow.
            run = client.create_replay(
                OWNER, ReplayBody(source="orders", window="2024-01-02..2024-01-03", tps=1000)
            )
            run_dir = daemon.state_dir / "runs" / run.id
            jvm, driver = _jvm_and_driver(run_dir)
            modes_while_running = _modes(run_dir)
            finished = wait_for(client, run.id, TERMINAL)
            deadline = time.monotonic() + 15  # the watcher releases the run just after concluding it
            while (run_dir / "spec.json").exists() and time.monotonic() < deadline:
                time.sleep(0.2)
    finally:
        daemon.stop()

    assert finished.state == "succeeded", daemon.log_text()[-3000:]  # the job needs nothing it lost
    for process in (jvm, driver):
        assert [name for name in process.environ if name.startswith("REPLAY_")] == [], process.command
        leaked = [
            name for name, value in secrets.items() if any(value in v for v in process.environ.values())
        ]
        assert leaked == [], process.command
    assert {name: modes_while_running[name] for name in ("spec.json", "stdout.log", "stderr.log", "pid")} == {
        "spec.json": 0o600,
        "stdout.log": 0o600,
        "stderr.log": 0o600,
        "pid": 0o600,
    }
    assert modes_while_running[run.id] == 0o700
    assert not (run_dir / "spec.json").exists()
    assert {"pid", "stdout.log", "stderr.log"} <= {path.name for path in run_dir.iterdir()}
