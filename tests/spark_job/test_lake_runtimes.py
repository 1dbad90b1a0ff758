"""The lake runtimes of the default EMR release load and work on the suite's Spark.

`scripts/lake-jars` fetches the Iceberg and Delta jars the release table names; here they are held to
that table (by the versions the jars declare of themselves) and a real `spark-submit` with them, as
the local launcher passes them, writes and reads both formats: day partitions, several commits, a
delete, an overwrite, and a read pinned to the first commit that sees none of what came after.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from daemon.adapters.local_launcher import LocalSparkLauncher
from daemon.core.spark_releases import DEFAULT_RELEASE, RELEASES
from scripts.lake_jars import jar_name
from tests.fixtures.spark import spark_environment

PROBE = Path(__file__).with_name("lake_probe.py")
RELEASE = RELEASES[DEFAULT_RELEASE]
DAY_ONE = [f"e-2024-01-01-{index}" for index in range(3)]
DAY_TWO = [f"e-2024-01-02-{index}" for index in range(3)]
NOW = sorted([*DAY_ONE[1:], "fixed-2024-01-02-0", "fixed-2024-01-02-1"])


def _declared_version(jar: Path) -> str:
    """The version a jar declares of itself: Iceberg's build properties, else the manifest's."""
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
        if "iceberg-build.properties" in names:
            text, key, separator = archive.read("iceberg-build.properties").decode(), "git.build.version", "="
        else:
            text, key, separator = (
                archive.read("META-INF/MANIFEST.MF").decode(),
                "Implementation-Version",
                ": ",
            )
    fields = dict(line.split(separator, 1) for line in text.splitlines() if separator in line)
    return fields[key].strip()


def test_the_fetched_jars_are_the_releases_artifacts(lake_jars: list[Path]) -> None:
    assert [jar.name for jar in lake_jars] == [jar_name(artifact) for artifact in RELEASE.lake_artifacts()]
    iceberg, delta_spark, delta_storage = lake_jars
    assert _declared_version(iceberg) == RELEASE.iceberg
    assert {_declared_version(delta_spark), _declared_version(delta_storage)} == {RELEASE.delta}


@pytest.mark.spark
def test_a_job_with_the_lake_jars_reads_iceberg_and_delta_at_now_and_at_their_first_commit(
    lake_jars: list[Path], tmp_path: Path
) -> None:
    launcher = LocalSparkLauncher(runs_dir=tmp_path / "runs", jars=tuple(lake_jars))
    command = launcher.submit_command("r-lake", tmp_path / "spec.json", workers=2)
    assert command[command.index("--jars") + 1] == ",".join(map(str, lake_jars))
    submit = command[: command.index("--jars") + 2]  # the launcher's spark-submit, with its jars
    catalog = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,"
        "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "hadoop",
        "spark.sql.catalog.lake.warehouse": str(tmp_path / "iceberg"),
    }
    conf = [arg for key, value in catalog.items() for arg in ("--conf", f"{key}={value}")]

    done = subprocess.run(
        [*submit, *conf, str(PROBE), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=spark_environment(),
        check=False,
    )

    [line] = [line for line in done.stdout.splitlines() if line.startswith("LAKE_PROBE ")] or [
        pytest.fail(f"no probe line (exit {done.returncode}):\n{done.stderr[-4000:]}")
    ]
    seen = json.loads(line.removeprefix("LAKE_PROBE "))
    assert seen["spark"] == RELEASE.spark
    for table in ("iceberg", "delta"):
        assert seen[table]["now"] == NOW, table
        assert seen[table]["first"] == DAY_ONE, table
        assert seen[table]["commits"] == 4, table
        assert sorted(seen[table]["partitions"]) == ["2024-01-01", "2024-01-02"], table
