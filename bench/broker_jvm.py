"""The local broker's CPU under two sets of JVM options: ``python -m bench.broker_jvm --rounds 2``.

Why: on a 2-core machine the broker shares the CPU with Spark, the daemon and the tests, so what
it spends is taken from them (docs/decisions/0061). For each option set in turn (G1 with full tiered
compilation, as ``scripts/local_kafka.py`` ran it before; the serial collector with the client
compiler alone, as it runs it now; the order alternates between rounds) this starts a fresh broker,
and reads its own CPU time (``/proc/<pid>/stat``) at ready, after a minute idle, after a first
million 200-byte records from one confluent-kafka producer, and over three million more (warm):

    broker-jvm opts= start_cpu_s= idle_cpu_s_per_min= first_m_cpu_s= first_m_s= warm_cpu_s_per_m= warm_per_s=
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from scripts import local_kafka
from scripts.stray_jobs import interrupt_on_sigterm

COMMON = ["-Xms256m", "-Xmx512m", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"]
OPTIONS = {
    "g1-c2": ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExplicitGCInvokesConcurrent"],
    "serial-c1": ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"],
}
TOPIC, RECORDS, VALUE = "broker-jvm", 1_000_000, b"x" * 200
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def send(producer: Producer, records: int) -> float:
    """Seconds to hand ``records`` to the broker and have every one acknowledged."""
    began = time.monotonic()
    for index in range(records):
        while True:
            try:
                producer.produce(TOPIC, VALUE, str(index % 1000).encode())
                break
            except BufferError:
                producer.poll(0.01)
        if index % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("records left unacknowledged")
    return time.monotonic() - began


def measure(name: str, state: Path, idle_s: float) -> str:
    kept = list(local_kafka.BROKER_JVM_OPTS)
    local_kafka.BROKER_JVM_OPTS[:] = [*COMMON, *OPTIONS[name]]  # read at spawn only
    shutil.rmtree(state, ignore_errors=True)
    try:  # a SIGTERM while the broker starts still stops it: its pid file is written at spawn
        bootstrap = local_kafka.start(state)
        pid = int((state / "broker.pid").read_text())
        started = cpu_s(pid)
        time.sleep(idle_s)
        idle = cpu_s(pid) - started
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, 3, 1)]).values():
            future.result()
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        before = cpu_s(pid)
        first_s = send(producer, RECORDS)
        first = cpu_s(pid) - before
        before = cpu_s(pid)
        warm_s = send(producer, 3 * RECORDS)
        warm = (cpu_s(pid) - before) / 3
    finally:
        local_kafka.BROKER_JVM_OPTS[:] = kept
        local_kafka.stop(state)
    return (
        f"broker-jvm opts={name} start_cpu_s={started:.1f} idle_cpu_s_per_min={idle * 60 / idle_s:.1f} "
        f"first_m_cpu_s={first:.1f} first_m_s={first_s:.1f} warm_cpu_s_per_m={warm:.2f} "
        f"warm_per_s={3 * RECORDS / warm_s:.0f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=2, help="each option set this many times, in turn")
    parser.add_argument("--idle-s", type=float, default=60.0)
    args = parser.parse_args()
    if args.rounds < 1 or args.idle_s <= 0:
        parser.error("--rounds takes 1 or more, --idle-s a number of seconds above 0")
    interrupt_on_sigterm()  # a SIGTERM still stops the broker this run started
    with tempfile.TemporaryDirectory(prefix="broker-jvm-") as root:
        for round_ in range(args.rounds):
            for name in list(OPTIONS)[:: 1 if round_ % 2 == 0 else -1]:
                print(measure(name, Path(root) / name, args.idle_s), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
