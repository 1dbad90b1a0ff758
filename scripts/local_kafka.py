#!/usr/bin/env python3
"""Run a real single-node Apache Kafka 4.x broker on loopback for tests, demos and benchmarks.

One file on purpose (over 400 lines): it runs by path and is imported without the project installed.

    scripts/local-kafka start  [--state-dir DIR] [--fresh] [--timeout S]
    scripts/local-kafka stop   [--state-dir DIR]
    scripts/local-kafka status [--state-dir DIR]

The broker is assembled from Maven Central jars (scripts/kafka/pom.xml) into
~/.cache/kafka-replay/kafka-<version>/ once, then started as a detached combined
broker+controller (KRaft) on free 127.0.0.1 ports. `start` prints `bootstrap=HOST:PORT` as its
last stdout line; progress goes to stderr. Bench scripts can `import local_kafka` and call
`start(state_dir)` / `stop(state_dir)` directly. Only stdlib and confluent_kafka are used.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

SCRIPTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = SCRIPTS_DIR.parent
POM = SCRIPTS_DIR / "kafka" / "pom.xml"
LOG4J_CONFIG = SCRIPTS_DIR / "kafka" / "log4j2.properties"
DEFAULT_STATE_DIR = REPO_ROOT / ".state" / "kafka"

KAFKA_VERSION = os.environ.get("LOCAL_KAFKA_VERSION", "4.1.1")
LOG4J_VERSION = "2.24.3"
HOST = "127.0.0.1"
NODE_ID = 1
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
MAVEN_TIMEOUT_S = 900.0
# The machines have 2 cores and the broker shares them with Spark and the tests: keep it modest.
# The serial collector and the client compiler alone (docs/decisions/0061, bench/broker_jvm.py): the
# broker started on 3.0-3.4 s of CPU instead of 4.3-6.0 and took a million warm records on 0.9-1.1
# CPU-seconds instead of 1.5-2.6, acknowledging them faster.
BROKER_JVM_OPTS = [
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
]
START_MARKER = "[local-kafka] ===== start"
# One-shot tools: quick JIT start-up, and no 300-line config dump in broker.log.
TOOL_JVM_OPTS = [
    "-Xmx256m",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
    "-Dlocal.kafka.log.level=WARN",
]

# Broker processes started by this Python process, so stop() can reap them (no zombies).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class LocalKafkaError(RuntimeError):
    """A start/stop failure with a message meant for a human (includes the log tail)."""


@dataclass(frozen=True)
class Layout:
    """Where one broker keeps its files; everything lives under a single state dir."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "server.properties"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "broker.log"

    @property
    def pid_file(self) -> Path:
        return self.root / "broker.pid"

    @property
    def bootstrap_file(self) -> Path:
        return self.root / "bootstrap"

    @property
    def controller_port_file(self) -> Path:
        return self.root / "controller.port"

    @property
    def lock_file(self) -> Path:
        return self.root / ".lock"

    def wipeable(self) -> list[Path]:
        """Only files this script creates, so --fresh on a mistyped --state-dir deletes nothing else."""
        return [
            self.data,
            self.config,
            self.log,
            self.pid_file,
            self.bootstrap_file,
            self.controller_port_file,
        ]


@dataclass(frozen=True)
class BrokerStatus:
    """What `status` reports: whether our broker process is alive and answering."""

    running: bool
    healthy: bool
    pid: int | None
    bootstrap: str | None


def _say(message: str) -> None:
    """Progress goes to stderr so the last stdout line stays `bootstrap=...`."""
    print(f"local-kafka: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Serialise concurrent callers (parallel CI jobs, two terminals) on one cache or state dir."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- jars: fetched once from Maven Central, cached outside the repo ---------------------------------


def cache_root() -> Path:
    """Jar cache root; honours XDG_CACHE_HOME like other tools, default ~/.cache/kafka-replay."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-replay"


def _expected_manifest(version: str) -> dict[str, str]:
    """What a usable cache must have been built from; a changed POM invalidates it."""
    return {
        "kafka_version": version,
        "log4j_version": LOG4J_VERSION,
        "pom_sha256": hashlib.sha256(POM.read_bytes()).hexdigest(),
    }


def _cache_is_complete(dest: Path, expected: dict[str, str]) -> bool:
    """A cache dir only counts once its manifest matches and every listed jar is present."""
    try:
        manifest = json.loads((dest / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    if any(manifest.get(key) != value for key, value in expected.items()):
        return False
    jars = manifest.get("jars") or []
    return bool(jars) and all((dest / "libs" / jar).is_file() for jar in jars)


def _run_maven(libs: Path, version: str) -> None:
    """Resolve the broker + tools + log4j2 runtime closure into `libs` with plain Maven."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalKafkaError("Maven (mvn) is not on PATH; it is needed once to fetch the Kafka jars")
    command = [
        mvn,
        "-B",
        "-q",
        "-Dstyle.color=never",
        "-f",
        str(POM),
        f"-Dkafka.version={version}",
        f"-Dlog4j.version={LOG4J_VERSION}",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={libs}",
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise LocalKafkaError(f"Maven did not finish within {MAVEN_TIMEOUT_S:.0f}s") from exc
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip().splitlines()
        raise LocalKafkaError(
            f"Maven could not resolve Kafka {version} (exit {result.returncode}):\n" + "\n".join(output[-40:])
        )


def ensure_jars(version: str = KAFKA_VERSION) -> Path:
    """Return the dir of broker jars, fetching them first if no complete cache exists.

    The download lands in a temp dir that is renamed into place only when complete, so an
    interrupted fetch is never mistaken for a cache; the fast path never runs Maven.
    """
    root = cache_root()
    dest = root / f"kafka-{version}"
    expected = _expected_manifest(version)
    if _cache_is_complete(dest, expected):
        return dest / "libs"
    with _file_lock(root / ".lock"):
        if _cache_is_complete(dest, expected):  # another process fetched while we waited
            return dest / "libs"
        for leftover in root.glob(f".kafka-{version}.*"):  # debris of interrupted runs
            shutil.rmtree(leftover, ignore_errors=True)
        staging = root / f".kafka-{version}.tmp-{os.getpid()}"
        _say(f"fetching Kafka {version} jars from Maven Central into {dest} (one time)")
        began = time.monotonic()
        _run_maven(staging / "libs", version)
        jars = sorted(path.name for path in (staging / "libs").glob("*.jar"))
        manifest = {**expected, "jars": jars}
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if dest.exists():  # stale (older POM): move aside, then swap in atomically
            dest.rename(root / f".kafka-{version}.old-{os.getpid()}")
        staging.rename(dest)
        shutil.rmtree(root / f".kafka-{version}.old-{os.getpid()}", ignore_errors=True)
        _say(f"fetched {len(jars)} jars in {time.monotonic() - began:.1f}s")
    return dest / "libs"


# --- ports and configuration ---------------------------------------------------------------------


def _free_port() -> int:
    """Let the kernel pick an unused loopback port (bind port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _port_is_free(port: int) -> bool:
    """Bind-test with SO_REUSEADDR like the JVM does, so TIME_WAIT leftovers do not count as busy."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _pick_port(recorded: int | None, taken: set[int], what: str) -> int:
    """Reuse the port this state dir had (clients keep working across restarts) when it is free."""
    if recorded is not None and recorded not in taken and _port_is_free(recorded):
        return recorded
    port = _free_port()
    while port in taken:
        port = _free_port()
    if recorded is not None:
        _say(f"recorded {what} port {recorded} is busy; using {port}")
    return port


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _read_bootstrap(layout: Layout) -> str | None:
    try:
        return layout.bootstrap_file.read_text().strip() or None
    except OSError:
        return None


def _recorded_port(layout: Layout) -> int | None:
    bootstrap = _read_bootstrap(layout)
    if bootstrap is None:
        return None
    try:
        return int(bootstrap.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None


def server_properties(
    layout: Layout, port: int, controller_port: int, overrides: Mapping[str, str] | None = None
) -> str:
    """Broker config: one combined KRaft node on loopback with test-friendly defaults.

    A static voter (controller.quorum.voters) is used instead of `format --standalone` because a
    standalone quorum records the controller endpoint in the metadata log; a static one lets a
    restart move the controller to another port if the old one is taken.
    """
    settings = {
        "process.roles": "broker,controller",
        "node.id": str(NODE_ID),
        "controller.quorum.voters": f"{NODE_ID}@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(layout.data),
        # Tests create every topic explicitly; a typo must fail, not silently make a topic.
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        # Fewer internal partitions: the first consumer group / transaction is ready sooner on 2 cores.
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.num.partitions": "10",
        "group.initial.rebalance.delay.ms": "0",
        **(overrides or {}),  # `--set`: a test's own broker (one that refuses transactions, say)
    }
    lines = ["# Written by scripts/local-kafka on every start; edits are overwritten."]
    lines += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


# --- storage and process -------------------------------------------------------------------------


def _java() -> str:
    """The JVM to run: $JAVA_HOME/bin/java if set, else `java` on PATH (Kafka 4 needs 17+)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise LocalKafkaError("java is not on PATH (Kafka 4 needs Java 17 or newer)")
    return java


def _jvm(libs: Path, options: list[str]) -> list[str]:
    """java + options + our log4j2 config + the whole cached jar dir as classpath."""
    return [_java(), *options, f"-Dlog4j2.configurationFile={LOG4J_CONFIG}", "-cp", f"{libs}/*"]


def kafka_uuid() -> str:
    """A cluster id in Kafka's format (url-safe base64 of 16 random bytes, no leading '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _format_storage(layout: Layout, libs: Path) -> None:
    """KRaft refuses to start on unformatted dirs ("No readable meta.properties files found")."""
    if (layout.data / "meta.properties").is_file():
        return
    cluster_id = kafka_uuid()
    command = [*_jvm(libs, TOOL_JVM_OPTS), "kafka.tools.StorageTool", "format"]
    command += ["-t", cluster_id, "-c", str(layout.config)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    with layout.log.open("a") as log:
        log.write(f"[local-kafka] storage format (cluster id {cluster_id}):\n{result.stdout}{result.stderr}")
    if result.returncode != 0:
        raise LocalKafkaError(
            f"formatting {layout.data} failed (exit {result.returncode}):\n{result.stdout}{result.stderr}"
        )


def _cmdline(pid: int) -> list[str]:
    """argv of a live process; empty for a missing or zombie process."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _is_our_broker(pid: int, layout: Layout) -> bool:
    """True only for the java running kafka.Kafka on this state dir's config: a recycled pid is not ours."""
    argv = _cmdline(pid)
    return "kafka.Kafka" in argv and str(layout.config) in argv


def _running_pid(layout: Layout) -> int | None:
    """The pid of this state dir's broker if it is alive; clears a stale pid file."""
    pid = _read_int(layout.pid_file)
    if pid is None:
        return None
    if _is_our_broker(pid, layout):
        return pid
    layout.pid_file.unlink(missing_ok=True)
    return None


def _spawn(layout: Layout, libs: Path) -> subprocess.Popen[bytes]:
    """Start the broker in its own session so it outlives this command and ^C in the terminal."""
    command = [*_jvm(libs, BROKER_JVM_OPTS), "kafka.Kafka", str(layout.config)]
    with layout.log.open("ab") as log:
        log.write(f"\n{START_MARKER} {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n".encode())
        log.flush()
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=layout.root,
            start_new_session=True,
        )
    _CHILDREN[process.pid] = process
    return process


def _has_exited(pid: int, layout: Layout) -> bool:
    """Exit check that also reaps our own child, since a zombie still has a /proc entry."""
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is None:
            return False
        _CHILDREN.pop(pid, None)
        return True
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return not _is_our_broker(pid, layout)


def _wait_exit(pid: int, layout: Layout, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _has_exited(pid, layout):
            return True
        time.sleep(0.1)
    return _has_exited(pid, layout)


def _tail(path: Path, lines: int = 40) -> str:
    """Last lines of the latest run only: the log is appended to across restarts."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    latest_run = text[text.rfind(START_MARKER) :] if START_MARKER in text else text
    return "\n".join(latest_run.splitlines()[-lines:])


# --- readiness -----------------------------------------------------------------------------------


def _admin_client_class() -> type[AdminClient]:
    """Import confluent_kafka lazily so `--help` and `stop` work with a bare python3."""
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError as exc:
        raise LocalKafkaError("confluent_kafka is not installed; run with the repo's .venv") from exc
    return AdminClient


def _admin_client(bootstrap: str) -> AdminClient:
    """A quiet AdminClient: connection-refused chatter while the broker boots is expected."""
    return _admin_client_class()(
        {"bootstrap.servers": bootstrap, "log_level": 0, "reconnect.backoff.max.ms": 1000}
    )


def answers_metadata(bootstrap: str, timeout_s: float = 3.0) -> bool:
    """True when the broker serves a metadata request listing at least one broker."""
    from confluent_kafka import KafkaException

    admin = _admin_client(bootstrap)
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException:
        return False
    return bool(metadata.brokers)


def _port_accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
        return True
    return False


def _wait_ready(bootstrap: str, alive: Callable[[], bool], timeout_s: float) -> str | None:
    """Poll until metadata answers; returns None when ready, else why it is not."""
    port = int(bootstrap.rsplit(":", 1)[1])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:  # cheap TCP probe first, no librdkafka backoff
        if not alive():
            return "the broker process exited"
        if _port_accepts(port):
            break
        time.sleep(0.2)
    while time.monotonic() < deadline:
        if not alive():
            return "the broker process exited"
        if answers_metadata(bootstrap, timeout_s=min(3.0, max(0.5, deadline - time.monotonic()))):
            return None
        time.sleep(0.2)
    return f"no metadata answer from {bootstrap} within {timeout_s:.0f}s"


# --- public API ----------------------------------------------------------------------------------


def _stop_locked(layout: Layout, timeout_s: float) -> bool:
    """SIGTERM (clean shutdown), then SIGKILL after timeout_s; True if a broker was stopped."""
    pid = _running_pid(layout)
    if pid is None:
        return False
    _say(f"stopping broker pid {pid}")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not _wait_exit(pid, layout, timeout_s):
        _say(f"broker pid {pid} ignored SIGTERM for {timeout_s:.0f}s; sending SIGKILL")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _wait_exit(pid, layout, 10.0)
    layout.pid_file.unlink(missing_ok=True)
    return True


def _wipe(layout: Layout) -> None:
    for path in layout.wipeable():
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def _launch(layout: Layout, timeout_s: float, overrides: Mapping[str, str] | None = None) -> str:
    """Fetch jars, write config, format if needed, spawn, and wait until the broker answers."""
    libs = ensure_jars()
    port = _pick_port(_recorded_port(layout), set(), "broker")
    controller_port = _pick_port(_read_int(layout.controller_port_file), {port}, "controller")
    bootstrap = f"{HOST}:{port}"
    layout.config.write_text(server_properties(layout, port, controller_port, overrides))
    _format_storage(layout, libs)
    began = time.monotonic()
    process = _spawn(layout, libs)
    layout.pid_file.write_text(f"{process.pid}\n")
    layout.bootstrap_file.write_text(f"{bootstrap}\n")
    layout.controller_port_file.write_text(f"{controller_port}\n")
    problem = _wait_ready(bootstrap, lambda: process.poll() is None, timeout_s)
    if problem is not None:
        if process.poll() is None:  # hung rather than dead: do not leave it behind
            _stop_locked(layout, 10.0)
        layout.pid_file.unlink(missing_ok=True)
        raise LocalKafkaError(
            f"Kafka broker did not start: {problem}. Last lines of {layout.log}:\n{_tail(layout.log)}"
        )
    _say(f"broker pid {process.pid} ready on {bootstrap} in {time.monotonic() - began:.1f}s")
    return bootstrap


def start(
    state_dir: Path = DEFAULT_STATE_DIR,
    fresh: bool = False,
    timeout_s: float = START_TIMEOUT_S,
    overrides: Mapping[str, str] | None = None,
) -> str:
    """Start (or find already running) the broker for state_dir and return its bootstrap address.

    Idempotent: a healthy broker from the same state dir is reused. `fresh` stops it and wipes
    its data first. Data and ports persist across stop/start otherwise. `overrides`: broker
    properties over the defaults, applied when it starts (not to one already running).
    """
    _admin_client_class()  # fail before spawning anything we could not health-check
    layout = Layout(state_dir.resolve())
    layout.root.mkdir(parents=True, exist_ok=True)
    with _file_lock(layout.lock_file):
        if fresh:
            _stop_locked(layout, STOP_TIMEOUT_S)
            _wipe(layout)
        pid = _running_pid(layout)
        bootstrap = _read_bootstrap(layout)
        if pid is not None and bootstrap is not None:
            problem = _wait_ready(bootstrap, lambda: _is_our_broker(pid, layout), timeout_s)
            if problem is not None:
                raise LocalKafkaError(
                    f"broker pid {pid} from {layout.root} is running but not healthy ({problem}); "
                    f"see {layout.log} or run `scripts/local-kafka stop`"
                )
            _say(f"broker pid {pid} already running on {bootstrap}")
            return bootstrap
        return _launch(layout, timeout_s, overrides)


def stop(state_dir: Path = DEFAULT_STATE_DIR, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop exactly the broker this state dir started; data and port are kept for the next start."""
    layout = Layout(state_dir.resolve())
    if not layout.root.is_dir():
        _say(f"no state dir {layout.root}; nothing to stop")
        return
    with _file_lock(layout.lock_file):
        if not _stop_locked(layout, timeout_s):
            _say("broker is not running")


def status(state_dir: Path = DEFAULT_STATE_DIR) -> BrokerStatus:
    """Report process liveness plus a quick metadata probe."""
    layout = Layout(state_dir.resolve())
    pid = _running_pid(layout) if layout.root.is_dir() else None
    bootstrap = _read_bootstrap(layout) if layout.root.is_dir() else None
    healthy = pid is not None and bootstrap is not None and answers_metadata(bootstrap)
    return BrokerStatus(running=pid is not None, healthy=healthy, pid=pid, bootstrap=bootstrap)


# --- command line --------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="local-kafka",
        description="Run a local single-node Apache Kafka broker (KRaft) on 127.0.0.1.",
        epilog="status exits 0 when running and answering, 1 when running but not answering, 3 when stopped.",
    )
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help="config, data, log, pid and port of this broker (default: <repo>/.state/kafka)",
    )
    parser.add_argument("--fresh", action="store_true", help="start: stop and wipe this state dir first")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="start: a broker property over the defaults (repeatable)",
    )
    parser.add_argument(
        "--timeout", type=float, default=START_TIMEOUT_S, help="start: seconds to wait for the broker"
    )
    return parser


def _print_status(state_dir: Path) -> int:
    current = status(state_dir)
    if not current.running:
        last = f" (last bootstrap {current.bootstrap})" if current.bootstrap else ""
        print(f"stopped{last}")
        return 3
    print(f"running pid={current.pid}" + ("" if current.healthy else " (not answering metadata requests)"))
    print(f"bootstrap={current.bootstrap}")
    return 0 if current.healthy else 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.fresh and args.command != "start":
        _parser().error("--fresh only applies to start")
    try:
        if args.command == "start":
            overrides = dict(item.split("=", 1) for item in args.set if "=" in item)
            if len(overrides) != len(args.set):
                _parser().error("--set takes KEY=VALUE")
            bootstrap = start(args.state_dir, fresh=args.fresh, timeout_s=args.timeout, overrides=overrides)
            print(f"bootstrap={bootstrap}", flush=True)
            return 0
        if args.command == "stop":
            stop(args.state_dir)
            return 0
        return _print_status(args.state_dir)
    except LocalKafkaError as exc:
        print(f"local-kafka: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
