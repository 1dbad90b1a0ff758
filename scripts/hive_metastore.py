#!/usr/bin/env python3
"""A Hive metastore on loopback, built from the jars pyspark ships, for tests and local trials.

    python scripts/hive_metastore.py [--state-dir DIR] [--port N]    # runs until Ctrl-C

It is what a team's Spark session catalog is outside AWS: a Thrift service on a database (here
Derby, embedded, under the state directory). Spark jobs reach it with
``spark.hadoop.hive.metastore.uris``, the daemon with a ``hive`` catalog in REPLAY_LAKE_CATALOGS.
The launcher (scripts/hive/LoopbackMetastore.java) is compiled once with `javac` against pyspark's
jars into ~/.cache/kafka-replay/, beside the Kafka and lake jars; `start` returns once the port
answers and prints ``uri=thrift://127.0.0.1:PORT`` when run as a script.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SCRIPTS_DIR = Path(__file__).resolve().parent
if str(SCRIPTS_DIR.parent) not in sys.path:  # run by path: `scripts.…` imports resolve from the repo
    sys.path.insert(0, str(SCRIPTS_DIR.parent))

from scripts.spark_kafka_jars import cache_root, file_lock  # noqa: E402

SOURCE = SCRIPTS_DIR / "hive" / "LoopbackMetastore.java"
MAIN_CLASS = "LoopbackMetastore"
HOST = "127.0.0.1"
START_TIMEOUT_S = 120.0
JVM_OPTS = ["-Xmx384m", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]


class MetastoreError(RuntimeError):
    """The metastore did not start; the message has the tail of its log."""


@dataclass
class Metastore:
    uri: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def spark_jars() -> Path:
    """pyspark's jar folder: the Hive 2.3 metastore, DataNucleus, Derby and Thrift are all in it."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def ensure_launcher() -> Path:
    """The compiled launcher's folder, compiled first when this source and pyspark have none yet."""
    import pyspark

    digest = hashlib.sha256(SOURCE.read_bytes() + pyspark.__version__.encode()).hexdigest()[:12]
    dest = cache_root() / f"hive-metastore-{digest}"
    with file_lock(cache_root() / "hive-metastore.lock"):
        if not (dest / f"{MAIN_CLASS}.class").exists():
            dest.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(
                ["javac", "-cp", f"{spark_jars()}/*", "-d", str(dest), str(SOURCE)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise MetastoreError(f"javac could not build {SOURCE.name}:\n{done.stderr[-2000:]}")
    return dest


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


def start(state_dir: Path, port: int | None = None) -> Metastore:
    """A metastore whose database and warehouse live under ``state_dir``; returns once it answers."""
    state_dir.mkdir(parents=True, exist_ok=True)
    launcher, port = ensure_launcher(), port or _free_port()
    database = state_dir / "metastore_db"
    properties = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={database};create=true",
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "datanucleus.connectionPoolingType": "HikariCP",  # Hive's default, BoneCP, is not in pyspark
        "hive.metastore.warehouse.dir": str(state_dir / "warehouse"),
        "derby.stream.error.file": str(state_dir / "derby.log"),
        # Hive's own log4j2 file asks for async loggers, whose library pyspark does not ship
        "log4j2.contextSelector": "org.apache.logging.log4j.core.selector.ClassLoaderContextSelector",
    }
    log = state_dir / "metastore.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                "java",
                *JVM_OPTS,
                *(f"-D{key}={value}" for key, value in properties.items()),
                "-cp",
                f"{launcher}{os.pathsep}{spark_jars()}/*",
                MAIN_CLASS,
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        if _answers(port):
            return Metastore(uri=f"thrift://{HOST}:{port}", process=process, log=log)
        time.sleep(0.5)
    metastore = Metastore(uri="", process=process, log=log)
    metastore.stop()
    tail = log.read_text(errors="replace")[-3000:]
    raise MetastoreError(f"the Hive metastore did not answer on {HOST}:{port}; its log ends:\n{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", type=Path, default=SCRIPTS_DIR.parent / ".state" / "hive")
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    metastore = start(args.state_dir, args.port)
    print(f"uri={metastore.uri}", flush=True)
    try:
        metastore.process.wait()
    except KeyboardInterrupt:
        metastore.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
