"""Runs the scenarios one after another in one world and prints a line each, then the summary."""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.fixtures.kafka import LocalBroker
from tests.scenarios.chaos.audit import Tally, audit_secrets
from tests.scenarios.chaos.scenarios import SCENARIOS, Sizes
from tests.scenarios.chaos.world import world


def run(
    root: Path,
    sizes: Sizes,
    *,
    seed: int,
    only: Sequence[str] = (),
    broker: LocalBroker | None = None,
    say: Callable[[str], None] = print,
) -> list[Tally]:
    """Every scenario (or `only` those), each line printed as it ends; the secrets check last."""
    tallies: list[Tally] = []
    rng = random.Random(seed)
    with world(root, broker) as built:
        for name, scenario in SCENARIOS.items():
            if only and name not in only:
                continue
            started = time.monotonic()
            try:
                tally = scenario(built, sizes, random.Random(rng.randrange(2**32)))
            except Exception as exc:  # a scenario that breaks is a finding, and the others still run
                tally = Tally(name, problems=[f"scenario crashed: {exc!r}", traceback.format_exc(limit=3)])
            finally:
                built.stop_all()
            tally.seconds = time.monotonic() - started
            say(tally.line())
            tallies.append(tally)
        logs = Tally("secrets in logs")
        audit_secrets(built, logs)
        logs.figures["files"] = len(built.log_files())
        say(logs.line())
        tallies.append(logs)
    say(summary(tallies, seed))
    return tallies


def summary(tallies: list[Tally], seed: int) -> str:
    total = Tally("summary")
    for tally in tallies:
        for name in (
            "started",
            "finished",
            "selected",
            "confirmed",
            "on_topic",
            "lost",
            "duplicate_launches",
            "unreported_duplicates",
            "finals_missing",
            "finals_duplicated",
            "secrets_in_logs",
        ):
            setattr(total, name, getattr(total, name) + getattr(tally, name))
        total.seconds += tally.seconds
    failed = [tally.scenario for tally in tallies if not tally.ok]
    verdict = "PASS" if not failed else f"FAIL ({', '.join(failed)})"
    return (
        f"chaos summary: scenarios={len(tallies) - 1} seed={seed} runs started={total.started} "
        f"finished={total.finished} events selected={total.selected} confirmed={total.confirmed} "
        f"on_topic={total.on_topic} lost={total.lost} duplicate_launches={total.duplicate_launches} "
        f"unreported_duplicates={total.unreported_duplicates} finals_missing={total.finals_missing} "
        f"finals_duplicated={total.finals_duplicated} secrets_in_logs={total.secrets_in_logs} "
        f"({total.seconds:.0f}s) -> {verdict}"
    )
