"""Fetch the Iceberg and Delta runtimes an EMR release bundles, once, for local Spark.

    scripts/lake-jars                      # the default release's jars: prints `jars=<a.jar,b.jar,c.jar>`
    scripts/lake-jars --release emr-spark-8.1.0

On EMR the release's own copies are used (daemon/core/spark_releases.py names their paths); a local
job gets these with `--jars` (`REPLAY_LOCAL_JARS`). The versions come from the release table, never
from here: Maven's `dependency:copy` fetches exactly the listed artifacts (the Iceberg runtime is one
shaded jar, Delta is its Spark module and its storage layer; Spark itself ships the rest) into
~/.cache/kafka-replay/lake-<release>/, beside the Kafka jars.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from daemon.core.spark_releases import DEFAULT_RELEASE, SparkRelease, spark_release
from scripts.spark_kafka_jars import cache_root, file_lock

MAVEN_TIMEOUT_S = 600.0


class LakeJarsError(RuntimeError):
    """The jars could not be fetched; the message says why."""


def jar_name(coordinate: str) -> str:
    """The file Maven copies a coordinate to: `g:artifact:version` -> `artifact-version.jar`."""
    _group, artifact, version = coordinate.split(":")
    return f"{artifact}-{version}.jar"


def _cached(dest: Path, release: SparkRelease) -> list[Path] | None:
    try:
        manifest = json.loads((dest / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("artifacts") != list(release.lake_artifacts()):
        return None
    jars = [dest / jar_name(coordinate) for coordinate in release.lake_artifacts()]
    return jars if all(jar.is_file() for jar in jars) else None


def _fetch(release: SparkRelease, dest: Path) -> list[Path]:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LakeJarsError("Maven (mvn) is not on PATH; it is needed once to fetch the lake jars")
    staging = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    for coordinate in release.lake_artifacts():
        command = [
            mvn,
            "-B",
            "-q",
            "-Dstyle.color=never",
            "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy",
            f"-Dartifact={coordinate}",
            f"-DoutputDirectory={staging}",
        ]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise LakeJarsError(f"Maven did not fetch {coordinate} within {MAVEN_TIMEOUT_S:.0f}s") from exc
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            error = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line][:1]
            raise LakeJarsError(f"Maven could not fetch {coordinate}: {' '.join(error)[:300]}")
    manifest = {"release": release.label, "artifacts": list(release.lake_artifacts())}
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    jars = _cached(dest, release)
    if jars is None:
        raise LakeJarsError(f"Maven ran, yet {dest} lacks one of {', '.join(release.lake_artifacts())}")
    return jars


def ensure_lake_jars(label: str = DEFAULT_RELEASE) -> list[Path]:
    """The release's Iceberg and Delta jars, fetched first when no complete cache exists."""
    release = spark_release(label)
    root = cache_root()
    dest = root / f"lake-{release.label}"
    with file_lock(root / ".lake.lock"):
        jars = _cached(dest, release)
        if jars is None:
            print(
                f"lake-jars: fetching {release.label}'s Iceberg and Delta into {dest} (one time)",
                file=sys.stderr,
            )
            jars = _fetch(release, dest)
    return jars


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lake-jars", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--release", default=DEFAULT_RELEASE, help=f"an EMR release label ({DEFAULT_RELEASE})"
    )
    args = parser.parse_args(argv)
    try:
        jars = ensure_lake_jars(args.release)
    except Exception as exc:  # a refused label or a failed fetch: one line, no trace
        print(f"lake-jars: {exc}", file=sys.stderr)
        return 1
    print(f"jars={','.join(str(jar) for jar in jars)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
