"""`replay` against a real daemon: Ctrl-C while following, unknown sources, the platform's limits.

The Ctrl-C test runs the CLI as its own process following a run that never ends by itself (the
daemon launches `tests.fixtures.control_job` as its spark-submit: a real child process that stays
`running` until cancelled), sends it SIGINT, and checks the message, the exit code and the run.
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.cli.main import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, main
from daemon.contract.client import DaemonClient
from daemon.contract.models import RunOut
from tests.fixtures.control_job import standin_spark_submit
from tests.fixtures.daemon import OWNER, DaemonProcess, running_daemon

pytestmark = [pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 60.0


@pytest.fixture(scope="module")
def follow_daemon(
    tmp_path_factory: pytest.TempPathFactory, sample_table: Path, kafka_bootstrap: str
) -> Iterator[DaemonProcess]:
    tmp = tmp_path_factory.mktemp("replayd-follow")
    daemon = running_daemon(
        tmp,
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        extra={"REPLAY_SPARK_SUBMIT": str(standin_spark_submit(tmp))},
    )
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture
def client(follow_daemon: DaemonProcess) -> Iterator[DaemonClient]:
    with follow_daemon.client() as daemon_client:
        yield daemon_client


def _wait_for(client: DaemonClient, run_id: str, states: set[str]) -> RunOut:
    deadline = time.monotonic() + WAIT_S
    run = client.get_replay(OWNER, run_id)
    while run.state not in states and time.monotonic() < deadline:
        time.sleep(0.2)
        run = client.get_replay(OWNER, run_id)
    assert run.state in states, run
    return run


def _default_sigint() -> None:
    """The child gets Python's own Ctrl-C (KeyboardInterrupt) even when this test runs with SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_while_following_leaves_the_run_going_and_prints_the_cancel_command(
    follow_daemon: DaemonProcess, client: DaemonClient, tmp_path: Path
) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONUNBUFFERED": "1",  # the created run's line reaches the pipe at once
        "REPLAY_DAEMON_URL": follow_daemon.url,
        "REPLAY_API_TOKEN": follow_daemon.token,
        "REPLAY_USER": OWNER,
    }
    cli = subprocess.Popen(
        [sys.executable, "-m", "daemon.cli.main", "orders", "2024-01-07", "tps=10", "--follow", "--json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    run_id = ""
    try:
        assert cli.stdout is not None
        created = cli.stdout.readline()
        assert created, cli.communicate(timeout=30)
        run_id = json.loads(created)["id"]
        _wait_for(client, run_id, {"running"})
        assert cli.poll() is None  # still following

        cli.send_signal(signal.SIGINT)
        out, err = cli.communicate(timeout=30)

        assert cli.returncode == EXIT_INTERRUPTED == 130, err
        assert f"stopped following {run_id}: the run goes on." in err
        assert f"replay cancel {run_id}" in err
        assert "Traceback" not in err and out == ""  # stdout keeps only the JSON answers
        time.sleep(2.0)  # nothing cancels it a moment later either
        assert client.get_replay(OWNER, run_id).state == "running"
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait(timeout=10)
        if run_id:
            client.cancel_replay(OWNER, run_id)
            _wait_for(client, run_id, {"cancelled", "failed", "succeeded"})


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, follow_daemon: DaemonProcess) -> DaemonProcess:
    monkeypatch.setenv("REPLAY_DAEMON_URL", follow_daemon.url)
    monkeypatch.setenv("REPLAY_API_TOKEN", follow_daemon.token)
    monkeypatch.setenv("REPLAY_USER", OWNER)
    return follow_daemon


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_sources_with_a_name_the_catalog_lacks_is_bad_input(cli_env: DaemonProcess) -> None:
    code, out, err = _run(["sources", "ordres"])

    assert code == EXIT_BAD_INPUT
    assert out == ""
    assert "unknown source 'ordres' (known sources: orders)" in err


def test_sources_with_a_known_name_answers_with_that_source_only(cli_env: DaemonProcess) -> None:
    code, out, err = _run(["sources", "orders", "--json"])

    assert code == EXIT_OK, err
    assert [source["name"] for source in json.loads(out)] == ["orders"]


def test_a_rate_over_the_services_limit_is_refused_by_the_service_whatever_the_cli_environment_says(
    cli_env: DaemonProcess, client: DaemonClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the daemon's own variables, set for something else on this workstation, are not the CLI's business
    monkeypatch.setenv("REPLAY_MAX_TPS", "not a number")
    monkeypatch.setenv("REPLAY_LAUNCHER", "bogus")
    before = client.list_replays(OWNER).runs

    code, _, err = _run(["orders", "2024-01-07", "tps=300000"])

    assert code == EXIT_BAD_INPUT, err
    assert "tps=300000 is above this platform's maximum of 200000" in err
    assert client.list_replays(OWNER).runs == before
    code, out, err = _run(["list", "--json"])
    assert code == EXIT_OK, err
    assert "runs" in json.loads(out)
