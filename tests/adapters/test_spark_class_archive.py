"""The local drivers' class-data archive (ADR 0054).

The build protocol (one builder at a time, leftovers cleared, a failed build leaves nothing, a
detached builder finishes by itself) runs a stand-in `spark-submit` that does what the JVM does with
`-XX:ArchiveClassesAtExit`: writes the archive at exit. That the real archive is real is checked on a
real driver: started with it, Spark's classes come from the archive, not from their jars.
"""

from __future__ import annotations

import fcntl
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.adapters.local_launcher import LocalSparkLauncher
from daemon.adapters.spark_class_archive import (
    DRIVER_JAVA_OPTIONS,
    WARMUP_DONE,
    ClassArchive,
    default_directory,
    install_digest,
)
from tests.fixtures.spark import SPARK_SUBMIT, spark_environment

# Writes the file named by -XX:ArchiveClassesAtExit= and says the warm-up finished, as the real one;
# counts its calls beside itself; EXIT_CODE makes it fail.
STANDIN = """
import sys
from pathlib import Path
here = Path(sys.argv[0]).parent
with (here / "calls").open("a") as calls:
    calls.write("x")
code = {exit_code}
for arg in sys.argv:
    if "-XX:ArchiveClassesAtExit=" in arg:
        target = arg.split("-XX:ArchiveClassesAtExit=")[1].split()[0]
        Path(target).write_bytes(b"archive")
if code == 0:
    print("{done} 1715")
sys.exit(code)
"""


def standin(directory: Path, *, exit_code: int = 0) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    program = directory / "standin.py"
    program.write_text(STANDIN.format(exit_code=exit_code, done=WARMUP_DONE))
    script = directory / "spark-submit"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{program}" "$@"\n')
    script.chmod(0o700)
    return str(script)


def calls(spark_submit: str) -> int:
    counter = Path(spark_submit).parent / "calls"
    return len(counter.read_text()) if counter.exists() else 0


jars = st.lists(
    st.tuples(st.text(min_size=1, max_size=12), st.integers(0, 10**9), st.integers(0, 10**18)),
    max_size=6,
    unique=True,
)


@given(jars, st.randoms())
def test_the_digest_does_not_depend_on_the_jars_order(
    listed: list[tuple[str, int, int]], rng: random.Random
) -> None:
    shuffled = list(listed)
    rng.shuffle(shuffled)
    assert install_digest(listed, ("/jvm", 1, 2), "-x") == install_digest(shuffled, ("/jvm", 1, 2), "-x")


@pytest.mark.parametrize(
    "changed",
    [
        (
            [("spark-core.jar", 2, 5)],
            ("/jdk/lib/server/libjvm.so", 9, 1),
            "-XX:+UseSerialGC",
        ),  # a jar changed size
        (
            [("spark-core.jar", 1, 6)],
            ("/jdk/lib/server/libjvm.so", 9, 1),
            "-XX:+UseSerialGC",
        ),  # installed again where it was: same bytes, a new time (the JVM refuses the old archive)
        (
            [("spark-core.jar", 1, 5), ("extra.jar", 3, 5)],
            ("/jdk/lib/server/libjvm.so", 9, 1),
            "-XX:+UseSerialGC",
        ),
        (
            [("spark-core.jar", 1, 5)],
            ("/jdk/lib/server/libjvm.so", 9, 2),
            "-XX:+UseSerialGC",
        ),  # the JDK updated in place
        ([("spark-core.jar", 1, 5)], ("/jdk/lib/server/libjvm.so", 9, 1), "-XX:+UseG1GC"),  # other options
    ],
)
def test_an_archive_belongs_to_one_install_jvm_and_set_of_options(
    changed: tuple[list[tuple[str, int, int]], tuple[str, int, int], str],
) -> None:
    base = install_digest([("spark-core.jar", 1, 5)], ("/jdk/lib/server/libjvm.so", 9, 1), "-XX:+UseSerialGC")
    assert install_digest(*changed) != base


def test_a_build_writes_the_archive_once_and_clears_what_an_interrupted_one_left(tmp_path: Path) -> None:
    submit = standin(tmp_path / "bin")
    archive = ClassArchive(tmp_path / "cache" / "spark-classes-1.jsa", submit)
    archive.path.parent.mkdir(parents=True)
    leftover = archive.path.with_name(archive.path.name + ".999.tmp")
    leftover.write_bytes(b"half")

    assert archive.build(os.environ) is True
    assert archive.path.read_bytes() == b"archive"
    assert list(archive.path.parent.glob("*.tmp")) == []
    assert archive.build(os.environ) is True
    assert calls(submit) == 1, "an archive that is there is not built again"


def test_a_failed_build_leaves_no_archive_and_jobs_start_without_one(tmp_path: Path) -> None:
    submit = standin(tmp_path / "bin", exit_code=3)
    archive = ClassArchive(tmp_path / "cache" / "spark-classes-1.jsa", submit)

    assert archive.build(os.environ) is False
    assert not archive.ready()
    assert list(archive.path.parent.iterdir()) == [archive.path.parent / ".lock"]


def test_while_another_process_builds_it_a_second_builder_leaves_it_to_that_one(tmp_path: Path) -> None:
    submit = standin(tmp_path / "bin")
    archive = ClassArchive(tmp_path / "cache" / "spark-classes-1.jsa", submit)
    archive.path.parent.mkdir(parents=True)
    with (archive.path.parent / ".lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert archive.build(os.environ) is False
    assert calls(submit) == 0
    assert archive.build(os.environ) is True


def test_a_detached_builder_finishes_the_archive_by_itself(tmp_path: Path) -> None:
    submit = standin(tmp_path / "bin")
    archive = ClassArchive(tmp_path / "cache" / "spark-classes-1.jsa", submit)
    archive.path.parent.mkdir(parents=True)
    builder = archive.start_builder(os.environ, tmp_path / "builder.log")
    assert builder is not None
    assert builder.wait(timeout=60) == 0, (tmp_path / "builder.log").read_text()
    assert archive.ready()
    assert archive.start_builder(os.environ, tmp_path / "builder.log") is None, "nothing left to build"


def test_every_local_driver_is_started_with_the_archive_once_it_is_there(tmp_path: Path) -> None:
    archive = ClassArchive(tmp_path / "spark-classes-1.jsa", "spark-submit")
    with_archive = LocalSparkLauncher(runs_dir=tmp_path / "a" / "runs", class_archive=archive)
    without = LocalSparkLauncher(runs_dir=tmp_path / "b" / "runs")

    def java_options(launcher: LocalSparkLauncher) -> str:
        command = launcher.submit_command("r-1", tmp_path / "spec.json", workers=2)
        return next(arg for arg in command if arg.startswith("spark.driver.extraJavaOptions="))

    plain = f"spark.driver.extraJavaOptions={DRIVER_JAVA_OPTIONS}"
    assert java_options(with_archive) == plain, "not before it is built: the JDK's own archive would go too"
    archive.path.write_bytes(b"archive")
    assert java_options(with_archive) == f"{plain} -XX:SharedArchiveFile={archive.path}"
    assert java_options(without) == plain


def test_an_archive_at_a_path_spark_would_split_is_not_used(tmp_path: Path) -> None:
    archive = ClassArchive(tmp_path / "a cache" / "spark-classes-1.jsa", "spark-submit")
    archive.path.parent.mkdir()
    archive.path.write_bytes(b"archive")
    assert archive.java_options() == DRIVER_JAVA_OPTIONS


def test_a_build_clears_only_its_own_leftovers(tmp_path: Path) -> None:
    submit = standin(tmp_path / "bin")
    archive = ClassArchive(tmp_path / "cache" / "spark-classes-1.jsa", submit)
    archive.path.parent.mkdir(parents=True)
    someone_elses = archive.path.parent / "upload.tmp"
    someone_elses.write_bytes(b"not ours")
    assert archive.build(os.environ) is True
    assert someone_elses.exists()


@pytest.mark.spark
def test_a_driver_started_with_the_install_archive_maps_sparks_classes_from_it(tmp_path: Path) -> None:
    archive = ClassArchive.for_install(default_directory(), SPARK_SUBMIT)
    started = time.monotonic()
    assert archive.build(spark_environment(), wait=True), "the install's archive could not be built"
    script = tmp_path / "session.py"
    script.write_text(
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "print('rows', spark.range(5).count())\n"
        "spark.stop()\n"
    )
    log_classes = f"-Xlog:class+load=info:file={tmp_path}/classes.log"
    done = subprocess.run(
        [
            SPARK_SUBMIT,
            "--master",
            "local[1]",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            f"spark.driver.extraJavaOptions={archive.java_options()} {log_classes}",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=spark_environment(),
        check=False,
    )
    assert done.returncode == 0 and "rows 5" in done.stdout, done.stderr[-3000:]
    # Each class named once with its source: the archive, or a jar it was parsed from (lambdas and
    # generated classes name the class that defined them and are left out).
    sources = [line.split(" source: ", 1) for line in (tmp_path / "classes.log").read_text().splitlines()]
    spark = [source for name, source in sources if " org.apache.spark." in name]
    shared = sum(source == "shared objects file (top)" for source in spark)
    parsed = sum(source.startswith(("file:", "jar:")) for source in spark)
    assert shared > 1000, f"{shared} Spark classes from the archive ({time.monotonic() - started:.0f} s)"
    assert shared > 0.9 * (shared + parsed), (shared, parsed)
