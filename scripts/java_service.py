"""Run a small Java service on loopback from a one-file launcher: compile it once, start it, wait.

The test Hive metastore (scripts/hive_metastore.py) and the Iceberg REST catalog
(scripts/iceberg_rest.py) are each a short Java `main` over jars we already fetch. This module holds
what they share. It compiles a launcher with `javac` into ~/.cache/kafka-replay/ (keyed by its
source and classpath), starts it as a child process on a free 127.0.0.1 port, returns once the port
answers, and stops it again.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scripts.spark_kafka_jars import cache_root, file_lock

HOST = "127.0.0.1"
START_TIMEOUT_S = 120.0
JVM_OPTS = ("-Xmx384m", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")


class ServiceError(RuntimeError):
    """The service did not build or start; the message says why (with its log's tail)."""


@dataclass
class Service:
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


def compiled(source: Path, classpath: str, key: str) -> Path:
    """The folder holding ``source`` compiled against ``classpath``; ``key`` names what the classpath
    is (a version), so a new one compiles again."""
    digest = hashlib.sha256(source.read_bytes() + key.encode()).hexdigest()[:12]
    dest = cache_root() / f"{source.stem}-{digest}"
    with file_lock(cache_root() / f"{source.stem}.lock"):
        if not (dest / f"{source.stem}.class").exists():
            dest.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(
                ["javac", "-cp", classpath, "-d", str(dest), str(source)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise ServiceError(f"javac could not build {source.name}:\n{done.stderr[-2000:]}")
    return dest


def free_port() -> int:
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


def launch(
    main_class: str,
    classpath: Sequence[str],
    *,
    port: int,
    uri: str,
    log: Path,
    args: Sequence[str] = (),
    properties: Mapping[str, str] | None = None,
) -> Service:
    """Start ``main_class`` and return once ``port`` answers; its output goes to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                "java",
                *JVM_OPTS,
                *(f"-D{key}={value}" for key, value in (properties or {}).items()),
                "-cp",
                os.pathsep.join(classpath),
                main_class,
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    service = Service(uri=uri, process=process, log=log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        if _answers(port):
            return service
        time.sleep(0.5)
    service.stop()
    tail = log.read_text(errors="replace")[-3000:]
    raise ServiceError(f"{main_class} did not answer on {HOST}:{port}; its log ends:\n{tail}")


def serve(start: Callable[[Path], Service], description: str, state_dir: Path, argv: list[str] | None) -> int:
    """A launcher script's command line: start in ``--state-dir``, print ``uri=…``, run until Ctrl-C."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--state-dir", type=Path, default=state_dir)
    args = parser.parse_args(argv)
    service = start(args.state_dir)
    print(f"uri={service.uri}", flush=True)
    try:
        service.process.wait()
    except KeyboardInterrupt:
        service.stop()
    return 0
