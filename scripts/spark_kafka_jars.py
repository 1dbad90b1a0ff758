#!/usr/bin/env python3
"""Fetch Spark's Kafka connector jars once, for the Spark-sink reference line of bench/e2e.py.

    scripts/spark-kafka-jars            # prints `connector=<version>` then `jars=<a.jar,b.jar,...>`

Like scripts/local-kafka's broker jars: resolved from Maven Central with plain Maven
(scripts/spark-kafka/pom.xml) into ~/.cache/kafka-replay/spark-kafka-<version>/, once. Only the jars
pyspark does not ship are kept: spark-sql-kafka-0-10, spark-token-provider-kafka-0-10, kafka-clients and
commons-pool2. The connector matching the installed pyspark is tried first; when Maven cannot resolve
it, the newest connector known to resolve (FALLBACK_VERSION) is tried once and the manifest says so.
Set SPARK_KAFKA_CONNECTOR_VERSION to pin one version (then nothing else is tried).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SCRIPTS_DIR = Path(__file__).resolve().parent
POM = SCRIPTS_DIR / "spark-kafka" / "pom.xml"
# the default EMR release's Spark minor: its 4.0.2 token provider did not resolve from Maven here
FALLBACK_VERSION = "4.0.0"
KEEP = ("spark-sql-kafka-0-10_", "spark-token-provider-kafka-0-10_", "kafka-clients-", "commons-pool2-")
MAVEN_TIMEOUT_S = 600.0


class SparkKafkaJarsError(RuntimeError):
    """The connector could not be fetched; the message says why."""


class NotServed(SparkKafkaJarsError):
    """Maven Central has no such connector version: remembered, so it is asked for only once."""


@dataclass(frozen=True)
class ConnectorJars:
    version: str  # the connector's version, which may differ from pyspark's (see `matches`)
    spark_version: str
    jars: list[Path]

    @property
    def matches(self) -> bool:
        return self.version == self.spark_version


def _say(message: str) -> None:
    print(f"spark-kafka-jars: {message}", file=sys.stderr, flush=True)


def installed_spark_version() -> str:
    import pyspark  # only asked for when no version is pinned

    return str(pyspark.__version__)


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-replay"


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _cached(dest: Path) -> list[Path] | None:
    try:
        manifest = json.loads((dest / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    jars = [dest / "libs" / name for name in manifest.get("jars") or []]
    return jars if len(jars) == len(KEEP) and all(jar.is_file() for jar in jars) else None


def _fetch(version: str, dest: Path) -> list[Path]:
    """Resolve the connector's closure with Maven into a staging dir; keep the four jars; swap in."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SparkKafkaJarsError("Maven (mvn) is not on PATH; it is needed once to fetch the jars")
    staging = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    command = [
        mvn,
        "-B",
        "-q",
        "-Dstyle.color=never",
        "-f",
        str(POM),
        f"-Dspark.kafka.version={version}",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging / 'all'}",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SparkKafkaJarsError(f"Maven did not finish within {MAVEN_TIMEOUT_S:.0f}s") from exc
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        last = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line][:1]
        output = done.stdout + done.stderr
        missing = "Could not find artifact" in output or "was not found in" in output
        kind = NotServed if missing else SparkKafkaJarsError
        raise kind(f"Maven could not resolve the connector {version}: {' '.join(last)[:300]}")
    (staging / "libs").mkdir()
    kept = sorted(jar.name for jar in (staging / "all").glob("*.jar") if jar.name.startswith(KEEP))
    for name in kept:
        (staging / "all" / name).rename(staging / "libs" / name)
    shutil.rmtree(staging / "all")
    (staging / "manifest.json").write_text(json.dumps({"version": version, "jars": kept}, indent=2) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    jars = _cached(dest)
    if jars is None:
        raise SparkKafkaJarsError(f"the connector {version} resolved without all of {', '.join(KEEP)}")
    return jars


def ensure_jars() -> ConnectorJars:
    """The connector's jars, fetched first when no complete cache exists."""
    spark_version = installed_spark_version()
    pinned = os.environ.get("SPARK_KAFKA_CONNECTOR_VERSION")
    candidates = [pinned] if pinned else list(dict.fromkeys([spark_version, FALLBACK_VERSION]))
    root = cache_root()
    failures: list[str] = []
    with file_lock(root / ".spark-kafka.lock"):
        for version in candidates:
            dest = root / f"spark-kafka-{version}"
            jars = _cached(dest)
            if jars is None:
                unresolvable = dest.with_name(f"{dest.name}.unresolvable")
                if unresolvable.exists():  # tried before: Maven Central does not serve it, do not ask again
                    failures.append(unresolvable.read_text().strip())
                    continue
                _say(f"fetching Spark's Kafka connector {version} from Maven Central into {dest} (one time)")
                try:
                    jars = _fetch(version, dest)
                except NotServed as exc:
                    unresolvable.write_text(f"{exc}\n")
                    failures.append(str(exc))
                    continue
                except SparkKafkaJarsError as exc:
                    failures.append(str(exc))
                    continue
            return ConnectorJars(version, spark_version, jars)
    raise SparkKafkaJarsError("; ".join(failures))


def main() -> int:
    try:
        found = ensure_jars()
    except SparkKafkaJarsError as exc:
        _say(str(exc))
        return 1
    if not found.matches:
        _say(
            f"the connector {found.version} stands in for {found.spark_version}, which Maven did not resolve"
        )
    print(f"connector={found.version}")
    print(f"jars={','.join(str(jar) for jar in found.jars)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
