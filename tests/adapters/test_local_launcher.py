"""The local launcher's admission default, its job monitor and what its jobs can see and leave behind
(real child processes, real files; the full Spark job is in `scenarios/test_job_secrets.py`)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.adapters.local_launcher import (
    JOB_ENTRY,
    PRUNE_EVERY_S,
    RELEASED,
    LocalSparkLauncher,
    _watch_job,
    default_max_concurrent_runs,
    job_environment,
)
from daemon.adapters.local_standby import SCRATCH, process_start_ticks
from daemon.core.errors import Unavailable
from daemon.usecases.ports import Handle, JobState
from spark_job.main import archive_name

GIB = 1024**3


def test_default_cap_is_one_job_per_two_cores_and_two_gib() -> None:
    assert default_max_concurrent_runs(cores=2, memory_bytes=8 * GIB) == 1
    assert default_max_concurrent_runs(cores=16, memory_bytes=64 * GIB) == 8
    assert default_max_concurrent_runs(cores=16, memory_bytes=6 * GIB) == 3  # memory bounds it
    assert default_max_concurrent_runs(cores=1, memory_bytes=1 * GIB) == 1  # never zero


def test_default_cap_reads_this_machine() -> None:
    assert default_max_concurrent_runs() >= 1


def test_the_monitor_wakes_the_watcher_at_the_result_line_then_at_exit(tmp_path: Path) -> None:
    stdout = tmp_path / "stdout.log"
    with stdout.open("wb") as out:
        process = subprocess.Popen(
            ["sh", "-c", 'sleep 0.3; echo "REPLAY_RESULT {\\"status\\": \\"succeeded\\"}"; sleep 1.5'],
            stdout=out,
        )
    wakes: list[float] = []
    monitor = threading.Thread(
        target=_watch_job,
        args=(stdout, lambda: process.poll() is None, lambda: wakes.append(time.monotonic())),
        kwargs={"clock": time.monotonic, "sleep": time.sleep},
    )
    started = time.monotonic()
    monitor.start()
    monitor.join(timeout=10)
    exited = time.monotonic()

    assert not monitor.is_alive()
    assert len(wakes) == 2
    assert wakes[0] - started < 1.0  # at the line, well before the process ended
    assert exited - wakes[1] < 0.5 and wakes[1] - wakes[0] > 1.0


# -- secrets: what the job inherits, who can read its files, how long the spec lives ------------------

SECRETS = {
    "REPLAY_SLACK_BOT_TOKEN": "xoxb-secret-bot-token",
    "REPLAY_API_TOKEN": "secret-api-token",
    "REPLAY_DATABASE_URL": "postgresql+psycopg://replay:secret-db-password@db/replay",
}


def _sleeping_spark_submit(directory: Path) -> Path:
    """A `spark-submit` that only sleeps: a real process to look at, no Spark (no `exec`: the shell
    keeps the pid, so its environment is never read mid-exec)."""
    script = directory / "sleeping-spark-submit"
    script.write_text("#!/bin/sh\nsleep 60\n")
    script.chmod(0o700)
    return script


def _environ(pid: int) -> dict[str, str]:
    """The process's environment; read again while empty (Linux shows none for a moment after exec)."""
    deadline = time.monotonic() + 5
    while not (raw := Path(f"/proc/{pid}/environ").read_bytes()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return dict(entry.decode().partition("=")[::2] for entry in raw.split(b"\0") if entry)


@pytest.fixture
def sleeping_launcher(tmp_path: Path) -> Iterator[LocalSparkLauncher]:
    launcher = LocalSparkLauncher(
        runs_dir=tmp_path / "runs", spark_submit=str(_sleeping_spark_submit(tmp_path))
    )
    yield launcher
    for pid_file in (tmp_path / "runs").glob("*/pid"):
        launcher.cancel({"pid": int(pid_file.read_text().split()[0]), "start_ticks": None}, grace_s=5)


def test_the_job_inherits_none_of_the_daemons_settings_but_what_spark_and_aws_need(
    sleeping_launcher: LocalSparkLauncher, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {**SECRETS, "AWS_REGION": "eu-west-1", "SOMETHING_ELSE": "x"}.items():
        monkeypatch.setenv(name, value)

    handle = sleeping_launcher.submit("r-env", "{}", workers=1)

    environ = _environ(int(handle["pid"]))
    assert "PATH" in environ
    assert [name for name in environ if name.startswith("REPLAY_") or name == "SOMETHING_ELSE"] == []
    assert not any(secret in value for value in environ.values() for secret in SECRETS.values())
    assert (environ["AWS_REGION"], environ["PATH"]) == ("eu-west-1", os.environ["PATH"])
    assert environ["PYSPARK_PYTHON"] == environ["PYSPARK_DRIVER_PYTHON"] == sys.executable


def test_job_environment_keeps_only_the_allowed_names() -> None:
    daemon = {
        **SECRETS,
        "PATH": "/bin",
        "LC_ALL": "C.UTF-8",
        "JAVA_HOME": "/jdk",
        "SPARK_HOME": "/spark",
        "PYTHONPATH": "/src",
        "AWS_PROFILE": "lake",
        "SLACK_BOT_TOKEN": "xoxb-other",
        "DATABASE_URL": "postgresql://u:p@h/db",
    }

    kept = job_environment(daemon)

    assert {**kept, "PYSPARK_PYTHON": "", "PYSPARK_DRIVER_PYTHON": ""} == {
        "PATH": "/bin",
        "LC_ALL": "C.UTF-8",
        "JAVA_HOME": "/jdk",
        "SPARK_HOME": "/spark",
        "PYTHONPATH": "/src",
        "AWS_PROFILE": "lake",
        "PYSPARK_PYTHON": "",
        "PYSPARK_DRIVER_PYTHON": "",
    }


def test_the_run_directory_is_0700_and_its_spec_pid_and_logs_0600(
    sleeping_launcher: LocalSparkLauncher, tmp_path: Path
) -> None:
    """Even under a permissive umask, and over a run directory an older daemon left 0755 with a 0644 spec."""
    stale = tmp_path / "runs" / "r-modes"
    stale.mkdir(parents=True, mode=0o755)
    (stale / "spec.json").write_text("{}")
    (stale / "spec.json").chmod(0o644)
    previous = os.umask(0)
    try:
        sleeping_launcher.submit("r-modes", '{"kafka": {"sasl_password": "p"}}', workers=1)
    finally:
        os.umask(previous)

    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in [stale, *stale.iterdir()]}
    assert modes == {
        "r-modes": 0o700,
        "spec.json": 0o600,
        "pid": 0o600,
        "lock": 0o600,
        "stdout.log": 0o600,
        "stderr.log": 0o600,
    }
    assert stat.S_IMODE((tmp_path / "runs").stat().st_mode) == 0o700
    assert (stale / "spec.json").read_text() == '{"kafka": {"sasl_password": "p"}}'


def _exited(launcher: LocalSparkLauncher, handle: Handle) -> None:
    """Wait for its monitor to reap a job just killed."""
    deadline = time.monotonic() + 10
    while launcher.state(handle) is not JobState.EXITED:
        assert time.monotonic() < deadline, "the killed job was never reaped"
        time.sleep(0.05)


def test_a_killed_jobs_spark_scratch_goes_at_its_release_and_a_live_ones_stays(
    sleeping_launcher: LocalSparkLauncher, tmp_path: Path
) -> None:
    """Spark cleans its scratch at a clean exit only: a job killed mid-shuffle leaves its blocks."""
    handle = sleeping_launcher.submit("r-scratch", "{}", workers=1)
    scratch = tmp_path / "runs" / "r-scratch" / SCRATCH
    assert _environ(int(handle["pid"]))["SPARK_LOCAL_DIRS"] == str(scratch)
    (scratch / "blockmgr-1").mkdir(parents=True)  # as Spark's block manager does
    (scratch / "blockmgr-1" / "shuffle_0_0_0.data").write_bytes(b"rows")

    assert sleeping_launcher.release(handle) is True
    assert (scratch / "blockmgr-1" / "shuffle_0_0_0.data").exists()  # its job still runs: kept

    os.killpg(int(handle["pid"]), signal.SIGKILL)
    _exited(sleeping_launcher, handle)
    assert sleeping_launcher.release(handle) is True
    assert not scratch.exists()
    kept = sorted(path.name for path in scratch.parent.iterdir())
    assert kept == ["lock", "pid", RELEASED, "stderr.log", "stdout.log"]


def test_an_operators_own_spark_scratch_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scratch disk named by spark.local.dir (or SPARK_LOCAL_DIRS) is the operator's choice."""
    submit = str(_sleeping_spark_submit(tmp_path))
    by_conf = LocalSparkLauncher(
        runs_dir=tmp_path / "conf-runs", spark_submit=submit, extra_conf={"spark.local.dir": "/scratch"}
    )
    handles = [by_conf.submit("r-conf", "{}", workers=1)]
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/big-disk")
    by_env = LocalSparkLauncher(runs_dir=tmp_path / "env-runs", spark_submit=submit)
    handles.append(by_env.submit("r-env", "{}", workers=1))
    try:
        environs = [_environ(int(handle["pid"])) for handle in handles]
    finally:
        for owner, handle in zip((by_conf, by_env), handles, strict=True):
            owner.cancel(handle, grace_s=5)

    assert "SPARK_LOCAL_DIRS" not in environs[0]  # Spark takes spark.local.dir from the conf
    assert environs[1]["SPARK_LOCAL_DIRS"] == "/big-disk"


def test_a_starting_launcher_clears_the_scratch_of_a_job_that_ended_while_no_daemon_ran(
    sleeping_launcher: LocalSparkLauncher, tmp_path: Path
) -> None:
    ended = sleeping_launcher.submit("r-ended-scratch", "{}", workers=1)
    running = sleeping_launcher.submit("r-running-scratch", "{}", workers=1)
    for handle in (ended, running):
        (tmp_path / "runs" / handle["run_id"] / SCRATCH / "blockmgr-1").mkdir(parents=True)
    os.killpg(int(ended["pid"]), signal.SIGKILL)
    _exited(sleeping_launcher, ended)

    LocalSparkLauncher(runs_dir=tmp_path / "runs", spark_submit="/nonexistent/spark-submit")

    assert not (tmp_path / "runs" / "r-ended-scratch" / SCRATCH).exists()
    assert (tmp_path / "runs" / "r-running-scratch" / SCRATCH / "blockmgr-1").is_dir()


DAY_S = 86400.0
NO_SUCH_PID = f"{2**22 + 1} None\n"  # above Linux's highest pid: a job long gone
RELEASED_FOLDER = ("lock", "pid", "stdout.log", "stderr.log", RELEASED)


def _run_folder(
    runs: Path, run_id: str, *, age_days: float, names: tuple[str, ...] = RELEASED_FOLDER
) -> Path:
    """A run's folder holding `names` (by default as `release` leaves it), last written that long ago."""
    folder = runs / run_id
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_text(NO_SUCH_PID if name == "pid" else "")
    _age(folder, age_days)
    return folder


def _age(folder: Path, days: float) -> None:
    then = time.time() - days * DAY_S
    for path in (*folder.iterdir(), folder):
        os.utime(path, (then, then))


def test_a_starting_launcher_removes_released_run_folders_older_than_it_keeps(
    sleeping_launcher: LocalSparkLauncher, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    old = _run_folder(runs, "r-old", age_days=31)
    young = _run_folder(runs, "r-young", age_days=29)
    # its job ended while no daemon ran: its outcome is still to be read (the start-up deletes its spec)
    unread = _run_folder(runs, "r-unread", age_days=31, names=("lock", "pid", "stdout.log", "spec.json"))
    unstarted = _run_folder(runs, "r-unstarted", age_days=31, names=("lock", "spec.json"))
    handle = sleeping_launcher.submit("r-live", "{}", workers=1)  # holds its lock
    sleeping_launcher.release(handle)  # released while its job lives on
    _age(runs / "r-live", 31)
    on_standby = _run_folder(runs, "r-standby", age_days=31)  # a standby's job holds no run lock
    standby_job = subprocess.Popen(["sleep", "60"])
    try:
        (on_standby / "pid").write_text(f"{standby_job.pid} {process_start_ticks(standby_job.pid)}\n")
        _age(on_standby, 31)

        LocalSparkLauncher(
            runs_dir=runs, spark_submit="/nonexistent/spark-submit", run_dirs_keep_s=30 * DAY_S
        )
    finally:
        standby_job.kill()
        standby_job.wait()

    kept = [young, unread, unstarted, runs / "r-live", on_standby]
    assert sorted(path.name for path in runs.iterdir()) == sorted(path.name for path in kept)
    assert not old.exists()


def test_a_starting_launcher_removes_job_packages_unused_for_longer_than_it_keeps(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    packages = LocalSparkLauncher(runs_dir=runs, spark_submit="/nonexistent/spark-submit").package_dir
    current = archive_name(JOB_ENTRY.parent)  # what this daemon's jobs ship: kept whatever its age
    _package_files(packages, {"spark_job-0ld.zip": 31, current: 31, **KEPT_PACKAGES})
    _package_files(packages, {"spark_job-0ld.zip.123.tmp": 2 / 24})  # half-written by a job killed 2 h ago

    LocalSparkLauncher(runs_dir=runs, spark_submit="/nonexistent/spark-submit", run_dirs_keep_s=30 * DAY_S)

    assert sorted(path.name for path in packages.iterdir()) == sorted([current, *KEPT_PACKAGES])


def test_no_job_package_goes_while_a_job_an_earlier_daemon_started_is_alive(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    packages = LocalSparkLauncher(runs_dir=runs, spark_submit="/nonexistent/spark-submit").package_dir
    _package_files(packages, {"spark_job-0ld.zip": 31})  # maybe the code that job runs
    earlier = _run_folder(runs, "r-earlier", age_days=0, names=("lock", "spec.json"))
    job = subprocess.Popen(["sleep", "60"])
    try:
        (earlier / "pid").write_text(f"{job.pid} {process_start_ticks(job.pid)}\n")
        LocalSparkLauncher(
            runs_dir=runs, spark_submit="/nonexistent/spark-submit", run_dirs_keep_s=30 * DAY_S
        )
        assert (packages / "spark_job-0ld.zip").exists()
    finally:
        job.kill()
        job.wait()
    LocalSparkLauncher(runs_dir=runs, spark_submit="/nonexistent/spark-submit", run_dirs_keep_s=30 * DAY_S)
    assert not (packages / "spark_job-0ld.zip").exists()  # once it has ended


KEPT_PACKAGES = {
    "spark_job-recent.zip": 29,
    "spark_job-recent.zip.456.tmp": 0.1 / 24,
}  # the .tmp being written


def _package_files(packages: Path, ages_days: dict[str, float]) -> None:
    packages.mkdir(parents=True, exist_ok=True)
    for name, days in ages_days.items():
        (packages / name).write_bytes(b"zip")
        then = time.time() - days * DAY_S
        os.utime(packages / name, (then, then))


def test_releases_look_for_old_run_folders_at_most_hourly(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    now = [0.0]
    launcher = LocalSparkLauncher(
        runs_dir=runs, spark_submit="/nonexistent/spark-submit", run_dirs_keep_s=DAY_S, clock=lambda: now[0]
    )
    first = _run_folder(runs, "r-1", age_days=2)
    released = {"kind": "local", "run_id": "r-released", "pid": 2**22 + 1, "start_ticks": None}  # gone

    launcher.release(released)  # the start-up looked a moment ago
    assert first.exists()
    now[0] += PRUNE_EVERY_S
    launcher.release(released)
    assert not first.exists()

    second = _run_folder(runs, "r-2", age_days=2)
    now[0] += PRUNE_EVERY_S / 2
    launcher.release(released)
    assert second.exists()


def test_release_deletes_the_spec_and_a_new_launcher_still_re_attaches(
    sleeping_launcher: LocalSparkLauncher, tmp_path: Path
) -> None:
    handle = sleeping_launcher.submit("r-release", "{}", workers=1)

    assert sleeping_launcher.release(handle) is True
    assert sleeping_launcher.release(handle) is True  # again, as a watcher retrying does

    directory = tmp_path / "runs" / "r-release"
    kept = sorted(path.name for path in directory.iterdir())
    assert kept == ["lock", "pid", RELEASED, "stderr.log", "stdout.log"]
    restarted = LocalSparkLauncher(runs_dir=tmp_path / "runs", spark_submit="/nonexistent/spark-submit")
    assert restarted.submit("r-release", "{}", workers=1) == handle  # from the pid file: no new job
    assert restarted.state(handle) is JobState.RUNNING


def test_a_job_that_cannot_start_leaves_no_spec(tmp_path: Path) -> None:
    launcher = LocalSparkLauncher(runs_dir=tmp_path / "runs", spark_submit=str(tmp_path / "no-spark-submit"))

    with pytest.raises(FileNotFoundError, match="spark-submit not found"):
        launcher.submit("r-nostart", "{}", workers=1)

    assert not (tmp_path / "runs" / "r-nostart" / "spec.json").exists()


def test_a_starting_launcher_deletes_the_specs_of_jobs_that_ended_and_keeps_the_running_ones(
    sleeping_launcher: LocalSparkLauncher, tmp_path: Path
) -> None:
    """As after a daemon that stopped between a run's end and its release, or an older daemon's runs."""
    running = sleeping_launcher.submit("r-running", "{}", workers=1)
    ended = subprocess.Popen(["true"])
    ended.wait()
    for run_id, pid in (("r-ended", ended.pid), ("r-unstarted", None)):
        directory = tmp_path / "runs" / run_id
        directory.mkdir()
        (directory / "spec.json").write_text("{}")
        if pid is not None:
            (directory / "pid").write_text(f"{pid} 1\n")

    LocalSparkLauncher(runs_dir=tmp_path / "runs", spark_submit="/nonexistent/spark-submit")

    specs = sorted(spec.parent.name for spec in (tmp_path / "runs").glob("*/spec.json"))
    assert specs == ["r-running", "r-unstarted"]
    assert sleeping_launcher.state(running) is JobState.RUNNING


# -- launched once: the job writes its own pid file and holds the run's lock ---------------------------


def test_the_job_itself_wrote_the_pid_file_before_submit_returned(
    sleeping_launcher: LocalSparkLauncher, tmp_path: Path
) -> None:
    handle = sleeping_launcher.submit("r-pidfile", "{}", workers=1)

    pid, ticks = (tmp_path / "runs" / "r-pidfile" / "pid").read_text().split()
    assert (int(pid), int(ticks)) == (handle["pid"], handle["start_ticks"])
    assert ticks == Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[19]  # that process's


def test_a_job_holding_its_lock_before_its_pid_file_exists_is_waited_for_not_started_again(
    sleeping_launcher: LocalSparkLauncher, tmp_path: Path
) -> None:
    """The window a daemon can die in: the job is alive (it holds the run's lock), the pid file not yet
    written. A restarted daemon's launcher must wait for the pid file and re-attach."""
    handle = sleeping_launcher.submit("r-window", "{}", workers=1)
    pid_file = tmp_path / "runs" / "r-window" / "pid"
    recorded = pid_file.read_text()
    pid_file.unlink()  # as the instant before the job's first line ran
    pending = pid_file.with_suffix(".tmp")
    pending.write_text(recorded)

    def first_line_runs() -> None:  # as the job does: whole, by a rename, never a file read half-written
        pending.rename(pid_file)

    threading.Timer(0.5, first_line_runs).start()

    restarted = LocalSparkLauncher(runs_dir=tmp_path / "runs", spark_submit="/nonexistent/spark-submit")
    again = restarted.submit("r-window", "{}", workers=1)

    assert again == handle
    assert restarted.state(again) is JobState.RUNNING


def test_a_live_job_that_never_writes_its_pid_file_is_refused_not_doubled(
    sleeping_launcher: LocalSparkLauncher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("daemon.adapters.local_launcher.PID_FILE_WAIT_S", 0.3)
    sleeping_launcher.submit("r-silent", "{}", workers=1)
    pid_file = tmp_path / "runs" / "r-silent" / "pid"
    recorded = pid_file.read_text()
    pid_file.unlink()
    restarted = LocalSparkLauncher(
        runs_dir=tmp_path / "runs", spark_submit=str(_sleeping_spark_submit(tmp_path))
    )
    try:
        with pytest.raises(Unavailable, match="holds its lock"):
            restarted.submit("r-silent", "{}", workers=1)
        assert not pid_file.exists()  # nothing was started
    finally:
        pid_file.write_text(recorded)  # so the fixture stops the job


def test_after_the_job_ended_its_lock_is_free_and_a_new_submit_re_attaches_to_the_ended_job(
    tmp_path: Path,
) -> None:
    launcher = LocalSparkLauncher(runs_dir=tmp_path / "runs", spark_submit="true")
    ended = launcher.submit("r-ended", "{}", workers=1)
    deadline = time.monotonic() + 5
    while launcher.state(ended) is JobState.RUNNING and time.monotonic() < deadline:
        time.sleep(0.05)

    again = LocalSparkLauncher(runs_dir=tmp_path / "runs", spark_submit="true").submit(
        "r-ended", "{}", workers=1
    )

    assert again == ended and launcher.state(again) is JobState.EXITED
