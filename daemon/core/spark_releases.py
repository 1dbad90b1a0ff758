"""The EMR releases the job supports, and the Spark, Iceberg and Delta versions each one bundles.

Production runs the job on an EMR release; development and the tests run it on a local pyspark and
on Iceberg and Delta runtimes fetched from Maven Central. Those must be the versions the release
bundles, or the suite proves the job on a Spark nobody runs. This table is the one place the
versions are written: the pyspark pin in pyproject.toml, the jars `scripts/lake-jars` fetches and
the default `release_label` are held to it by tests/core/test_spark_releases.py.

The figures are AWS's own, from the release guide's "application versions" table of each release
(transcribed, with the pages' titles, in docs/reference/emr-releases.md). EMR builds carry an
`-amzn-N` suffix (Spark `4.0.2-amzn-0`); the open-source version it is built from is what is
recorded here, as that is what Maven Central and PyPI serve.
"""

from __future__ import annotations

from dataclasses import dataclass

from daemon.core.errors import ConfigError

# Where EMR's own copies of the lake runtimes live on its images (the same paths since emr-7.0.0;
# AWS's "Using Apache Iceberg / Delta Lake OSS with EMR Serverless" guides name them).
EMR_ICEBERG_JAR = "/usr/share/aws/iceberg/lib/iceberg-spark3-runtime.jar"
EMR_DELTA_JARS = ("/usr/share/aws/delta/lib/delta-spark.jar", "/usr/share/aws/delta/lib/delta-storage.jar")


@dataclass(frozen=True)
class SparkRelease:
    label: str
    spark: str  # open-source version the release's Spark is built from
    scala: str  # the Scala binary version of its Spark build
    iceberg: str
    delta: str
    source: str  # where the figures were read

    @property
    def spark_minor(self) -> str:
        """`4.0` for Spark 4.0.2: Iceberg publishes one runtime per Spark minor."""
        major, minor = self.spark.split(".")[:2]
        return f"{major}.{minor}"

    def iceberg_runtime(self) -> str:
        """The Maven coordinate of the Iceberg runtime for this Spark (one shaded jar)."""
        return f"org.apache.iceberg:iceberg-spark-runtime-{self.spark_minor}_{self.scala}:{self.iceberg}"

    def delta_runtime(self) -> tuple[str, str]:
        """The Maven coordinates of Delta Lake for this Spark: the Spark module and its storage layer."""
        return (f"io.delta:delta-spark_{self.scala}:{self.delta}", f"io.delta:delta-storage:{self.delta}")

    def lake_artifacts(self) -> tuple[str, ...]:
        """Every jar a local job needs to read this release's table formats, as Maven coordinates."""
        return (self.iceberg_runtime(), *self.delta_runtime())


def _release_guide(label: str) -> str:
    return f"AWS, Amazon EMR Release Guide, 'Amazon runtime for Apache Spark ({label})', application versions"


RELEASES: dict[str, SparkRelease] = {
    release.label: release
    for release in (
        SparkRelease(
            label="emr-spark-8.0.0",
            spark="4.0.2",
            scala="2.13",
            iceberg="1.10.1",
            delta="4.0.0",
            source=_release_guide("emr-spark-8.0.0"),
        ),
        SparkRelease(
            label="emr-spark-8.1.0",
            spark="4.1.1",
            scala="2.13",
            iceberg="1.11.0",
            delta="4.2.0",
            source=_release_guide("emr-spark-8.1.0"),
        ),
    )
}

# What a new deployment runs and what the suite is run on: the first GA release with Spark 4.
DEFAULT_RELEASE = "emr-spark-8.0.0"


# The jar that carries each table format's Spark runtime, by the start of its file name.
_RUNTIME_JARS = {"iceberg": "iceberg-spark-runtime-", "delta": "delta-spark_"}


def missing_runtime(table_format: str, jar_names: list[str]) -> str | None:
    """What a local job lacks to read ``table_format`` given its jars' file names; None: nothing
    (Parquet is Spark's own)."""
    prefix = _RUNTIME_JARS.get(table_format)
    if prefix is None or any(name.startswith(prefix) for name in jar_names):
        return None
    return f"{table_format} runtime ({prefix}*.jar)"


def spark_release(label: str) -> SparkRelease:
    """The release ``label`` names; a label not in the table is refused with the ones that are."""
    try:
        return RELEASES[label]
    except KeyError:
        raise ConfigError(
            f"EMR release {label!r} is not one the job is built for: {', '.join(sorted(RELEASES))}"
        ) from None
