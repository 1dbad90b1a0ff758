"""The release table is the one place the Spark, Iceberg and Delta versions are written.

The pin in pyproject.toml, the pyspark the suite runs on, the checked version of `arrow_map`'s
private calls and the default release label are each held to it here; the jars `scripts/lake-jars`
fetches are held to it in tests/spark_job/test_lake_runtimes.py, where a real job loads them.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from daemon.config.emr_settings import EmrSettings
from daemon.core.errors import ConfigError
from daemon.core.spark_releases import DEFAULT_RELEASE, RELEASES, missing_runtime, spark_release

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
DEFAULT = RELEASES[DEFAULT_RELEASE]


def test_the_pinned_pyspark_is_the_default_releases_spark() -> None:
    job = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["job"]
    [pin] = [requirement for requirement in job if requirement.startswith("pyspark")]
    assert re.fullmatch(r"pyspark==[\d.]+", pin), f"{pin}: one exact version, the release's"
    assert pin == f"pyspark=={DEFAULT.spark}"


def test_the_suite_runs_on_the_default_releases_spark() -> None:
    import pyspark

    assert pyspark.__version__ == DEFAULT.spark


def test_arrow_maps_private_calls_were_checked_on_that_minor() -> None:
    from spark_job.arrow_map import PYSPARK_MINOR

    assert DEFAULT.spark_minor == PYSPARK_MINOR


def test_a_new_deployment_runs_the_default_release() -> None:
    assert EmrSettings().release_label == DEFAULT_RELEASE


def test_the_default_release_is_emr_spark_8_as_aws_lists_it() -> None:
    """The figures of AWS's release guide for emr-spark-8.0.0, read once and written down here."""
    assert (DEFAULT.spark, DEFAULT.iceberg, DEFAULT.delta, DEFAULT.scala) == (
        "4.0.2",
        "1.10.1",
        "4.0.0",
        "2.13",
    )
    assert DEFAULT.lake_artifacts() == (
        "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.1",
        "io.delta:delta-spark_2.13:4.0.0",
        "io.delta:delta-storage:4.0.0",
    )


@pytest.mark.parametrize("label", sorted(RELEASES))
def test_every_release_names_its_source_and_a_spark_4(label: str) -> None:
    release = spark_release(label)
    assert release.label == label and label in release.source
    assert release.spark.startswith("4.") and release.iceberg_runtime().endswith(f":{release.iceberg}")


def test_a_release_not_in_the_table_is_refused_with_the_ones_that_are() -> None:
    with pytest.raises(
        ConfigError, match=r"'emr-7\.5\.0' is not one the job is built for: emr-spark-8\.0\.0"
    ):
        spark_release("emr-7.5.0")


@pytest.mark.parametrize(
    ("table_format", "jars", "missing"),
    [
        ("parquet", [], None),
        ("iceberg", ["iceberg-spark-runtime-4.0_2.13-1.10.1.jar"], None),
        ("delta", ["delta-spark_2.13-4.0.0.jar", "delta-storage-4.0.0.jar"], None),
        ("iceberg", ["delta-spark_2.13-4.0.0.jar"], "iceberg runtime (iceberg-spark-runtime-*.jar)"),
        ("delta", ["delta-storage-4.0.0.jar"], "delta runtime (delta-spark_*.jar)"),
    ],
)
def test_a_local_job_lacks_a_formats_runtime_without_its_jar(
    table_format: str, jars: list[str], missing: str | None
) -> None:
    assert missing_runtime(table_format, jars) == missing
