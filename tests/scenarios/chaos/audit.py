"""After a scenario: what users and their consumers see, counted from the broker, Slack and the logs.

Nothing here trusts the job's self-report alone. Events on the topic are read back from the broker
(distinct event ids of the run), launches are counted from every daemon's log, final messages from
what the Slack stand-in received, secrets by searching every log file for their values.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import KafkaException

from daemon.contract.client import DaemonClient
from daemon.contract.models import RunOut
from daemon.core.errors import ReplayError
from tests.fixtures.daemon import ADMIN, DaemonProcess
from tests.fixtures.kafka import consume_all, headers_of
from tests.scenarios.chaos.world import World

TERMINAL = {"succeeded", "failed", "cancelled"}
FINALS_WAIT_S = 120.0
FINAL = re.compile(r"\*(Done|Cancelled|Failed|Lost),\*")


@dataclass
class Tally:
    """One scenario's line: the counts the issue asks for, plus anything else that went wrong."""

    scenario: str
    started: int = 0
    finished: int = 0
    selected: int = 0
    confirmed: int = 0
    on_topic: int = 0
    lost: int = 0
    duplicate_launches: int = 0
    unreported_duplicates: int = 0
    finals_missing: int = 0
    finals_duplicated: int = 0
    secrets_in_logs: int = 0
    problems: list[str] = field(default_factory=list)
    figures: dict[str, object] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return (
            not self.problems
            and self.started == self.finished
            and not any(
                (
                    self.lost,
                    self.duplicate_launches,
                    self.unreported_duplicates,
                    self.finals_missing,
                    self.finals_duplicated,
                    self.secrets_in_logs,
                )
            )
        )

    def line(self) -> str:
        figures = "".join(f" {name}={value}" for name, value in self.figures.items())
        verdict = "ok" if self.ok else "FAILED"
        text = (
            f"chaos {self.scenario:<17} {verdict:<6} runs started={self.started} finished={self.finished} "
            f"events selected={self.selected} confirmed={self.confirmed} on_topic={self.on_topic} "
            f"lost={self.lost} duplicate_launches={self.duplicate_launches} "
            f"unreported_duplicates={self.unreported_duplicates} finals_missing={self.finals_missing} "
            f"finals_duplicated={self.finals_duplicated} secrets_in_logs={self.secrets_in_logs}"
            f"{figures} ({self.seconds:.0f}s)"
        )
        return "\n".join([text, *(f"  problem: {problem}" for problem in self.problems)])


def wait_terminal(client: DaemonClient, run_ids: list[str], timeout_s: float) -> dict[str, RunOut]:
    """Each run's final view, polling through daemon or database outages; unfinished ones left out."""
    done: dict[str, RunOut] = {}
    pending = list(run_ids)
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        for run_id in list(pending):
            try:
                run = client.get_replay(ADMIN, run_id)
            except ReplayError:
                break  # the daemon or its database is away for a moment
            if run.state in TERMINAL:
                done[run_id] = run
                pending.remove(run_id)
        if pending:
            time.sleep(1.0)
    return done


def _events_on_topic(world: World, run: RunOut) -> tuple[int, int]:
    """(records, distinct event ids) the broker holds for this run, read back from its topic."""
    try:
        messages = consume_all(world.bootstrap, run.topic, timeout_s=60)
    except KafkaException:
        return 0, 0  # a run cancelled before launch never got its topic
    mine = [m for m in messages if headers_of(m).get("replay-run-id") == run.id.encode()]
    ids = {json.loads(m.value() or b"{}").get("event_id") for m in mine}
    return len(mine), len(ids)


STARTED_EVENTS = ('"job started"', '"job started on a standby driver"')  # the launcher's log events


def _launches(daemons: list[DaemonProcess]) -> Counter[str]:
    """How many jobs each run got: the daemons' `job started` log events (on a standby driver too),
    or the jobs' own count when higher (each Spark driver announces its application in the run's log
    once, and a daemon killed as it launched one logged nothing)."""
    logged: Counter[str] = Counter()
    submitted: Counter[str] = Counter()
    for daemon in daemons:
        for line in daemon.log_text().splitlines():
            if line.startswith("{") and any(event in line for event in STARTED_EVENTS):
                logged[json.loads(line).get("run_id", "?")] += 1
        for log in (daemon.state_dir / "runs").glob("r-*/stderr.log"):
            # a cold job names its run, a standby driver (ADR 0049) itself: its log is the run's log
            text = log.read_text(errors="replace")
            submitted[log.parent.name] += text.count("Submitted application: replay-")
    return Counter({run: max(logged[run], submitted[run]) for run in logged | submitted})


def job_spans(daemons: list[DaemonProcess]) -> list[tuple[float, float]]:
    """(start, end) in epoch seconds of every local job these daemons launched, from the job's own
    files: its pid file is written by the job's process as it starts, its logs last as it ends."""
    spans = []
    for daemon in daemons:
        for pid_file in (daemon.state_dir / "runs").glob("r-*/pid"):
            logs = [pid_file.with_name(name) for name in ("stdout.log", "stderr.log")]
            ended = max((log.stat().st_mtime for log in logs if log.exists()), default=None)
            if ended is not None:
                spans.append((pid_file.stat().st_mtime, ended))
    return spans


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The largest number of spans open at one instant (a span ending as another starts: not both)."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = running = 0
    for _, step in events:  # at a tie the end (-1) sorts first
        running += step
        most = max(most, running)
    return most


def max_concurrent_jobs(daemons: list[DaemonProcess]) -> int:
    return most_at_once(job_spans(daemons))


def _finals(world: World, run_id: str) -> int:
    """Final messages Slack received for this run: in its thread, or as the parent when none opened."""
    messages = world.slack.messages()
    parents = {m.ts for m in messages if m.thread_ts is None and run_id in m.text}
    mine = [m for m in messages if m.ts in parents or m.thread_ts in parents]
    return sum(1 for m in mine if FINAL.search(m.text))


def count_secrets(world: World) -> list[str]:
    """`name in file` for every secret value found in any log."""
    found = []
    for path in world.log_files():
        try:
            text = path.read_text(errors="replace")
        except FileNotFoundError:  # a standby recycled since the listing: its logs are gone with it
            continue
        found += [
            f"{name} in {path.relative_to(world.root)}"
            for name, value in world.secrets.items()
            if value in text
        ]
    return found


def audit(
    world: World, tally: Tally, client: DaemonClient, run_ids: list[str], timeout_s: float = 600
) -> None:
    """Wait for the runs to end, then count what landed, what was launched and what Slack was told."""
    tally.started += len(run_ids)
    ended = wait_terminal(client, run_ids, timeout_s)
    tally.finished += len(ended)
    for run_id in run_ids:
        if run_id not in ended:
            tally.problems.append(f"{run_id} did not end within {timeout_s:.0f}s")
    launches = _launches(world.daemons)
    states: Counter[str] = Counter()
    for run in ended.values():
        states[run.state] += 1
        records, distinct = _events_on_topic(world, run)
        tally.selected += run.rows_selected or 0
        tally.confirmed += run.confirmed or 0  # an unknown count adds nothing it did not know
        tally.on_topic += distinct
        lost = max(0, run.confirmed - distinct) if run.confirmed is not None else 0
        if run.state == "succeeded" and run.rows_selected is not None:
            lost = max(lost, run.rows_selected - distinct)
        if lost:
            tally.problems.append(f"{run.id} ({run.state}): {lost} events lost")
        tally.lost += lost
        tally.unreported_duplicates += max(0, records - distinct - (run.duplicates or 0))
        tally.duplicate_launches += max(0, launches[run.id] - 1)
    # Slack is told last: give the final messages their retries (5 s apart) before counting.
    deadline = time.monotonic() + FINALS_WAIT_S
    while time.monotonic() < deadline and any(_finals(world, run_id) < 1 for run_id in ended):
        time.sleep(1.0)
    for run_id in ended:
        finals = _finals(world, run_id)
        if finals == 0:
            mentions = [m.text[:80] for m in world.slack.messages() if run_id in m.text]
            tally.problems.append(
                f"{run_id}: no final message; Slack holds {len(mentions)} naming it: {mentions}"
            )
        tally.finals_missing += finals == 0
        tally.finals_duplicated += max(0, finals - 1)
    tally.figures.update({state: count for state, count in sorted(states.items())})


def audit_secrets(world: World, tally: Tally) -> None:
    found = count_secrets(world)
    tally.secrets_in_logs += len(found)
    tally.problems += found
