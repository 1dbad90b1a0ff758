"""Standby drivers: the claim protocol both sides speak (`spark_job.standby`, real files), and the local
launcher keeping, handing over, replacing and recycling them (real processes: a stand-in `spark-submit`
that speaks the protocol with the job's own code, then writes the spec it was given beside it and
waits; a real Spark standby is in `scenarios/test_standby_e2e.py`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from daemon.adapters.local_launcher import JOB_ENTRY, LocalSparkLauncher
from daemon.adapters.local_standby import SCRATCH, Standby, StandbyDrivers, process_start_ticks
from daemon.usecases.ports import JobState
from spark_job import standby
from tests.fixtures.leftovers import process_running

FOLLOWED = "followed"
STANDIN = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from spark_job import standby
args = sys.argv
if "--standby" in args:
    at = args.index("--standby")
    directory, owner, wait = Path(args[at + 1]), args[at + 2], float(args[at + 3])
    (directory / standby.READY).write_text("")
    pid, ticks = owner.split(":")
    claimed = standby.wait_for_claim(directory, standby.Owner(int(pid), int(ticks)), max_wait_s=wait)
    if claimed is None:
        sys.exit(0)
    spec = Path(claimed[1].spec_uri)
else:
    spec = Path(args[-1])
(spec.parent / "followed").write_text(spec.read_text())
time.sleep(300)
"""


def standin_spark_submit(directory: Path) -> Path:
    """A `spark-submit` running `STANDIN` with this interpreter."""
    program = directory / "standin.py"
    program.write_text(STANDIN.format(root=str(Path(__file__).resolve().parents[2])))
    script = directory / "standin-spark-submit"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{program}" "$@"\n')
    script.chmod(0o700)
    return script


def _claim(directory: Path, spec: str = "/specs/r-1.json") -> None:
    (directory / "claim.tmp").write_text(f'{{"spec": "{spec}", "claimed_at": 1700000000.5}}')
    (directory / "claim.tmp").rename(directory / "claim")


def _gone_owner() -> standby.Owner:
    process = subprocess.Popen(["sleep", "0"])
    ticks = process_start_ticks(process.pid)
    process.wait()
    assert ticks is not None
    return standby.Owner(process.pid, ticks)


def test_a_claim_that_landed_is_taken_with_its_spec_and_hand_over_time(tmp_path: Path) -> None:
    _claim(tmp_path)

    claimed = standby.wait_for_claim(tmp_path, None, max_wait_s=5)

    assert claimed == (tmp_path, standby.Claim("/specs/r-1.json", 1700000000.5))


def test_a_standby_whose_daemon_is_gone_gives_up_at_once_and_no_claim_can_land_after(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "s-1"
    directory.mkdir()
    started = time.monotonic()

    assert standby.wait_for_claim(directory, _gone_owner(), max_wait_s=60) is None
    assert time.monotonic() - started < 5
    assert not directory.exists()  # renamed away: the launcher's claim now fails to land
    offered = Standby(directory, subprocess.Popen(["true"]), None, born=0.0)
    assert StandbyDrivers.claim(offered, tmp_path / "spec.json") is False
    offered.process.wait()


def test_a_standby_unclaimed_past_its_wait_gives_up(tmp_path: Path) -> None:
    directory = tmp_path / "s-1"
    directory.mkdir()

    assert standby.wait_for_claim(directory, None, max_wait_s=0.1) is None
    assert (tmp_path / "s-1.expired").is_dir()


def test_a_claim_that_lands_while_the_standby_gives_up_is_still_run(tmp_path: Path) -> None:
    """The claim lands between the standby's last look and its rename: it runs it, never drops it."""
    directory = tmp_path / "s-1"
    directory.mkdir()

    class LeavingAsTheClaimLands(standby.Owner):
        def alive(self) -> bool:
            _claim(directory)
            return False

    claimed = standby.wait_for_claim(directory, LeavingAsTheClaimLands(1, 1), max_wait_s=60)

    assert claimed is not None and claimed[0] == tmp_path / "s-1.expired"
    assert claimed[1].spec_uri == "/specs/r-1.json"


# -- the launcher keeps them -----------------------------------------------------------------------


def _wait(check: Callable[[], object], timeout_s: float = 30.0) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s} s")


def _standbys(root: Path) -> list[Path]:
    return sorted(path for path in (root / "standby").glob("s-*") if (path / "pid").exists())


def _pid(directory: Path) -> int:
    return int((directory / "pid").read_text().split()[0])


@pytest.fixture
def make_launcher(tmp_path: Path) -> Iterator[Callable[..., LocalSparkLauncher]]:
    made: list[LocalSparkLauncher] = []

    def make(
        spark_submit: Path | None = None, busy: Callable[[], bool] = lambda: False, **options: object
    ) -> LocalSparkLauncher:
        settings: dict[str, object] = {"max_concurrent_runs": 1, "standby_workers": 2, **options}
        launcher = LocalSparkLauncher(
            runs_dir=tmp_path / "runs",
            spark_submit=str(spark_submit or standin_spark_submit(tmp_path)),
            **settings,  # type: ignore[arg-type]
        )
        launcher.notify_on_change(lambda: None)
        launcher.keep_warm(busy)
        made.append(launcher)
        return launcher

    yield make
    for launcher in made:
        launcher.close()
    for pid_file in (tmp_path / "runs").glob("*/pid"):
        made[0].cancel({"pid": int(pid_file.read_text().split()[0]), "start_ticks": None}, grace_s=5)


def test_a_run_takes_the_ready_standby_and_the_next_one_waits_for_its_capacity(
    tmp_path: Path, make_launcher: Callable[..., LocalSparkLauncher]
) -> None:
    launcher = make_launcher()
    ready = _wait(lambda: [d for d in _standbys(tmp_path) if (d / "ready").exists()])
    assert isinstance(ready, list) and len(ready) == 1
    warm_pid = _pid(ready[0])

    handle = launcher.submit("r-warm", '{"run_id": "r-warm"}', workers=2)

    assert handle["standby"] is True and handle["warm"] is True and handle["pid"] == warm_pid
    assert (tmp_path / "runs" / "r-warm" / "pid").read_text().split()[0] == str(warm_pid)
    followed = tmp_path / "runs" / "r-warm" / FOLLOWED
    _wait(followed.exists)
    assert followed.read_text() == '{"run_id": "r-warm"}'  # the standby ran the run's own spec
    assert launcher.state(handle) is JobState.RUNNING
    time.sleep(1.5)  # several keeper rounds: the running job holds the only capacity
    assert [_pid(d) for d in _standbys(tmp_path)] == [warm_pid]  # the run's driver, no spare beside it

    launcher.cancel(handle, grace_s=5)

    assert launcher.state(handle) is JobState.EXITED
    _wait(lambda: [d for d in _standbys(tmp_path) if _pid(d) != warm_pid])  # free again: the next one
    _wait(lambda: warm_pid not in [_pid(d) for d in _standbys(tmp_path)])  # and the ended one is swept


def test_a_standbys_spark_scratch_is_in_its_own_folder_which_goes_when_it_ends(
    tmp_path: Path, make_launcher: Callable[..., LocalSparkLauncher]
) -> None:
    launcher = make_launcher()
    folder = _wait(lambda: _standbys(tmp_path))[0]  # type: ignore[index]
    pid = _pid(folder)

    environ = (Path(f"/proc/{pid}/environ").read_bytes() + b"\0").split(b"\0")
    assert f"SPARK_LOCAL_DIRS={folder / SCRATCH}".encode() in environ

    launcher.close()  # stops it: its folder, and the scratch inside, go with it
    assert not folder.exists()


def test_a_run_of_other_workers_starts_cold_and_the_standby_gives_back_the_capacity(
    tmp_path: Path, make_launcher: Callable[..., LocalSparkLauncher]
) -> None:
    launcher = make_launcher()
    spare = _pid(_wait(lambda: _standbys(tmp_path))[0])  # type: ignore[index]

    handle = launcher.submit("r-cold", "{}", workers=1)

    assert "standby" not in handle and handle["pid"] != spare
    _wait(lambda: not process_running(spare))  # one job per capacity: the spare stops, not kept beside it
    launcher.cancel(handle, grace_s=5)


def test_a_standby_that_dies_is_replaced(
    tmp_path: Path, make_launcher: Callable[..., LocalSparkLauncher]
) -> None:
    make_launcher()
    first = _pid(_wait(lambda: [d for d in _standbys(tmp_path) if (d / "ready").exists()])[0])  # type: ignore[index]

    os.killpg(first, 9)

    replaced = _wait(lambda: [d for d in _standbys(tmp_path) if _pid(d) != first and (d / "ready").exists()])
    assert isinstance(replaced, list) and len(_standbys(tmp_path)) == 1


def test_a_standby_that_dies_before_it_is_ready_is_not_retried_at_once(
    tmp_path: Path, make_launcher: Callable[..., LocalSparkLauncher]
) -> None:
    broken = tmp_path / "broken-spark-submit"
    broken.write_text("#!/bin/sh\necho 'no Java here' >&2\nexit 1\n")
    broken.chmod(0o700)
    launcher = make_launcher(broken)

    time.sleep(3.0)  # a spare dying before it was ready waits 5 s before the next try (doubling after)

    assert len(list((tmp_path / "standby").iterdir())) == 0
    logs = launcher.submit("r-after", "{}", workers=2)  # the run is started cold, and fails as it would
    _wait(lambda: launcher.state(logs) is JobState.EXITED)
    assert launcher.log_tail(logs) == ["no Java here"]


def test_a_standby_waiting_too_long_is_recycled(
    tmp_path: Path, make_launcher: Callable[..., LocalSparkLauncher]
) -> None:
    make_launcher(standby_max_idle_s=1.0)
    first = _pid(_wait(lambda: _standbys(tmp_path))[0])  # type: ignore[index]

    _wait(lambda: [d for d in _standbys(tmp_path) if _pid(d) != first])

    _wait(lambda: not process_running(first))


def test_a_run_cancelled_while_its_standby_is_starting_leaves_no_process(
    tmp_path: Path, make_launcher: Callable[..., LocalSparkLauncher]
) -> None:
    slow = tmp_path / "slow-spark-submit"
    slow.write_text(f'#!/bin/sh\nsleep 3\nexec "{standin_spark_submit(tmp_path)}" "$@"\n')
    slow.chmod(0o700)
    launcher = make_launcher(slow)
    starting = _wait(lambda: _standbys(tmp_path))
    assert isinstance(starting, list) and not (starting[0] / "ready").exists()

    handle = launcher.submit("r-early", '{"run_id": "r-early"}', workers=2)
    launcher.cancel(handle, grace_s=5)

    assert handle["standby"] is True and handle["warm"] is False  # taken while starting: not warm
    assert not process_running(int(handle["pid"]))
    time.sleep(4.0)  # past the moment it would have got ready: nothing followed the run's spec
    assert not (tmp_path / "runs" / "r-early" / FOLLOWED).exists()


def test_closing_stops_the_idle_standby_but_not_a_run_on_one(
    tmp_path: Path, make_launcher: Callable[..., LocalSparkLauncher]
) -> None:
    launcher = make_launcher(max_concurrent_runs=2)
    _wait(lambda: len([d for d in _standbys(tmp_path) if (d / "ready").exists()]) == 2)
    handle = launcher.submit("r-on", '{"run_id": "r-on"}', workers=2)
    idle = [_pid(d) for d in _standbys(tmp_path) if _pid(d) != handle["pid"]]

    launcher.close()

    assert idle and not any(process_running(pid) for pid in idle)
    assert launcher.state(handle) is JobState.RUNNING
    launcher.cancel(handle, grace_s=5)


def test_no_standby_starts_while_every_slot_is_held_across_daemons(
    tmp_path: Path, make_launcher: Callable[..., LocalSparkLauncher]
) -> None:
    held = [True]
    make_launcher(busy=lambda: held[0])

    time.sleep(1.5)  # three keeper rounds: another daemon's job has the cores
    assert _standbys(tmp_path) == []

    held[0] = False
    _wait(lambda: _standbys(tmp_path))


def test_a_standbys_session_gets_the_settings_of_every_format_whose_runtime_it_is_given(
    tmp_path: Path,
) -> None:
    """Its session starts before a run names a format: Delta's static settings come with its
    spark-submit when the Delta runtime is among the jars (and only then)."""
    runtimes = (
        tmp_path / "iceberg-spark-runtime-4.0_2.13-1.10.1.jar",
        tmp_path / "delta-spark_2.13-4.0.0.jar",
    )
    lake = LocalSparkLauncher(runs_dir=tmp_path / "runs", standby_workers=2, jars=runtimes)
    bare = LocalSparkLauncher(runs_dir=tmp_path / "runs", standby_workers=2)

    with_delta = lake.standby_command(tmp_path / "s-1", "1:2", 660)
    without = bare.standby_command(tmp_path / "s-1", "1:2", 660)

    assert "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension" in with_delta
    assert "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog" in with_delta
    assert not any("spark.sql.extensions" in arg for arg in without)
    for command in (with_delta, without):
        assert command[-5:] == [str(JOB_ENTRY), "--standby", str(tmp_path / "s-1"), "1:2", "660"]
