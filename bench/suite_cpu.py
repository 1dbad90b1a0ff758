"""Where a command's CPU goes, by kind of process: ``python -m bench.suite_cpu -- make test``.

On a 2-core machine the suite is bound by CPU (docs/decisions/0053), so what makes it faster is
less CPU, and the question is whose. Every ``INTERVAL_S`` this reads each process's own CPU time
(``/proc/<pid>/stat``: utime + stime) and its command line, and keeps the largest figure seen for
each process; a kind is a rule on the command line (a Spark driver, an executor, a broker, a
``replayd``, the job's Python workers, ...). At the end it prints one line per kind, with how many
processes of it ran, beside the whole machine's busy CPU over the same time (``/proc/stat``), so
what it could not see (processes that lived less than an interval, the kernel) shows as the gap.

    suite-cpu kind= processes= cpu_s= share=
    suite-cpu-total wall_s= busy_cpu_s= seen_cpu_s= seen_share= exit=

``--by-file N`` also prints the N test files whose processes spent the most, a process counted
with the test that was running when it started (pytest's ``PYTEST_CURRENT_TEST``, which a test's
daemons inherit; a process started with an environment of its own, as a Spark job is, counts with
its parent's); a session's shared services count with the test that first needed them:

    suite-cpu-file file= cpu_s= drivers= driver_cpu_s=
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

INTERVAL_S = 1.0
TICKS = os.sysconf("SC_CLK_TCK")

# First match wins: (kind, words that must all be in the command line).
KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("spark launcher (JVM)", ("java", "org.apache.spark.launcher.Main")),  # names SparkSubmit too
    ("spark driver (JVM)", ("java", "org.apache.spark.deploy.SparkSubmit")),
    ("spark executor (JVM)", ("java", "CoarseGrainedExecutorBackend")),
    ("spark master/worker (JVM)", ("java", "org.apache.spark.deploy.")),
    ("kafka broker (JVM)", ("java", "kafka.Kafka")),
    ("other JVM", ("java",)),
    ("job's Python workers", ("pyspark.daemon",)),
    ("job's Python workers", ("pyspark.worker",)),
    ("pytest", ("pytest",)),
    ("pytest", ("exec(eval(sys.stdin.readline()))",)),  # a pytest-xdist worker
    ("job driver (Python)", ("spark_job/",)),
    ("replayd", ("replayd",)),
    ("replayd", ("daemon.runtime.server",)),
    ("replay-bot", ("replay-bot",)),
    ("replay CLI", ("bin/replay",)),
    ("postgres", ("postgres",)),
    ("chromium", ("chromium",)),
    ("pip", ("pip install",)),
)


@dataclass
class Seen:
    kind: str
    cpu_s: float
    before_s: float = 0.0  # what a process running before the command had spent already
    before: bool = False  # running before the command: not necessarily its own
    test_file: str = ""  # the test file running when the process started, if any
    started: int = 0  # the process's start time (clock ticks after boot): a parent started before it

    @property
    def spent_s(self) -> float:
        return self.cpu_s - self.before_s


def kind_of(argv: list[str]) -> str:
    """The first rule all of whose words are in the command line."""
    line = " ".join(argv)
    for kind, words in KINDS:
        if all(word in line for word in words):
            return kind
    return "other: " + (Path(argv[0]).name if argv else "?")


def test_file_of(pid: str) -> str:
    """The test file in a process's inherited ``PYTEST_CURRENT_TEST``, or ``""``."""
    try:
        environ = Path("/proc", pid, "environ").read_bytes()
    except OSError:
        return ""
    for entry in environ.split(b"\0"):
        if entry.startswith(b"PYTEST_CURRENT_TEST="):
            return entry.split(b"=", 1)[1].decode(errors="replace").split("::", 1)[0]
    return ""


def busy_s() -> float:
    """The machine's CPU seconds spent not idle (all cores), from ``/proc/stat``."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]  # steal is the hypervisor's
    return (user + nice + system + irq + softirq) / TICKS


def sweep(
    seen: dict[tuple[int, int], Seen], by_pid: dict[int, Seen], own: int, *, first: bool = False
) -> None:
    """One look at every process; a pid is keyed with its start time, so a reused pid is a new one.
    ``first``: the processes already running, whose earlier CPU is not the command's. A process is
    classed by its latest command line: ``spark-submit`` is a shell until it becomes the driver's JVM,
    in the same pid. ``by_pid``: the latest process seen with each pid, for a child's parent (taken
    only if it started no later than the child: otherwise the pid was reused)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            argv = Path(entry.path, "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu_s = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
        key = (int(entry.name), int(fields[19]))  # pid, starttime
        argv = [word for word in argv if word]
        if not argv:  # a kernel thread, or one exiting
            continue
        found = seen.get(key)
        if found is None:
            test_file = test_file_of(entry.name)
            if not test_file and not first:  # an environment of its own: its parent's test
                parent = by_pid.get(int(fields[1]))
                test_file = parent.test_file if parent is not None and parent.started <= key[1] else ""
            found = seen[key] = Seen(
                kind_of(argv),
                cpu_s,
                cpu_s if first else 0.0,
                before=first,
                test_file=test_file,
                started=key[1],
            )
            by_pid[key[0]] = found
        else:
            found.kind, found.cpu_s = kind_of(argv), max(found.cpu_s, cpu_s)
            if not found.test_file and not found.before:  # first seen between fork and exec: look again
                found.test_file = test_file_of(entry.name)


def report_files(seen: dict[tuple[int, int], Seen], top: int) -> None:
    """The ``top`` test files by their processes' CPU, with their Spark drivers apart. Processes
    running before the command are left out (``seen_cpu_s`` counts them)."""
    cpu: dict[str, float] = defaultdict(float)
    driver_cpu: dict[str, float] = defaultdict(float)
    drivers: Counter[str] = Counter()
    for found in seen.values():
        if found.before or found.spent_s <= 0:
            continue
        name = found.test_file or "(no test running)"
        cpu[name] += found.spent_s
        if found.kind == "spark driver (JVM)":
            drivers[name] += 1
            driver_cpu[name] += found.spent_s
    for name, cpu_s in sorted(cpu.items(), key=lambda item: -item[1])[:top]:
        print(
            f"suite-cpu-file file={name!r} cpu_s={cpu_s:.0f} drivers={drivers[name]} "
            f"driver_cpu_s={driver_cpu[name]:.0f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--interval", type=float, default=INTERVAL_S)
    parser.add_argument("--by-file", type=int, default=0, metavar="N", help="the N costliest test files")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to measure")
    args = parser.parse_args()
    if args.by_file < 0:
        parser.error("--by-file takes a count of files, 0 or more")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    seen: dict[tuple[int, int], Seen] = {}
    by_pid: dict[int, Seen] = {}
    sweep(seen, by_pid, os.getpid(), first=True)
    began, busy_before = time.monotonic(), busy_s()
    child = subprocess.Popen(command)
    # stopped itself (SIGTERM), it stops the command too, then reports what it saw
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    try:
        while child.poll() is None:
            sweep(seen, by_pid, os.getpid())
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(args.interval)
    except KeyboardInterrupt:  # the command got the same Ctrl-C: report what it spent so far
        child.wait()
    sweep(seen, by_pid, os.getpid())
    wall_s, busy = time.monotonic() - began, busy_s() - busy_before
    by_kind: dict[str, float] = defaultdict(float)
    processes: Counter[str] = Counter()
    for found in seen.values():
        if found.spent_s > 0:
            kind = f"{found.kind} (running before)" if found.before else found.kind
            by_kind[kind] += found.spent_s
            processes[kind] += 1
    total = sum(by_kind.values())
    for kind, cpu_s in sorted(by_kind.items(), key=lambda item: -item[1]):
        share = cpu_s / busy if busy else 0.0
        print(f"suite-cpu kind={kind!r} processes={processes[kind]} cpu_s={cpu_s:.0f} share={share:.3f}")
    if args.by_file:
        report_files(seen, args.by_file)
    print(
        f"suite-cpu-total wall_s={wall_s:.0f} busy_cpu_s={busy:.0f} seen_cpu_s={total:.0f} "
        f"seen_share={total / busy if busy else 0.0:.3f} exit={child.returncode}"
    )
    return int(child.returncode or 0)


if __name__ == "__main__":
    sys.exit(main())
