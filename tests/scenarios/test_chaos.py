"""The chaos suite's short form (`make chaos` runs the long one), and the audit it relies on.

The audit's own checks are tested too: a check that could not fail would make every chaos line a
green one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.slack.run_messages import final_reply, progress_reply, run_parent
from tests.fixtures.kafka import LocalBroker
from tests.fixtures.slack import changed
from tests.fixtures.slack_messages import RUN
from tests.scenarios.chaos.audit import FINAL, Tally, most_at_once
from tests.scenarios.chaos.fuzz import cases
from tests.scenarios.chaos.scenarios import SHORT
from tests.scenarios.chaos.suite import run, summary

# Fixed here so a red CI run can be replayed: python -m tests.scenarios.chaos --short --seed 20261201
SEED = 20261201


@pytest.mark.kafka
@pytest.mark.spark
def test_the_short_chaos_suite_loses_nothing_launches_nothing_twice_and_tells_slack_once(
    tmp_path: Path, broker_control: LocalBroker
) -> None:
    lines: list[str] = []
    tallies = run(tmp_path, SHORT, seed=SEED, broker=broker_control, say=lines.append)
    assert len(tallies) == 10, lines  # nine scenarios and the secrets check
    assert all(tally.ok for tally in tallies), "\n".join(lines)
    assert sum(tally.started for tally in tallies) >= SHORT.kill_runs + SHORT.two_daemon_runs, lines
    assert lines[-1].endswith("-> PASS"), lines


@pytest.mark.parametrize("state", ["succeeded", "failed", "cancelled"])
def test_the_audit_recognises_every_final_message_and_nothing_else(state: str) -> None:
    run_view = changed(RUN, state=state, failure_reason="boom")
    assert FINAL.search(final_reply(run_view).text)
    assert not FINAL.search(progress_reply(run_view).text)
    assert not FINAL.search(run_parent(run_view).text)


@pytest.mark.parametrize(
    "field", ["lost", "duplicate_launches", "unreported_duplicates", "finals_missing", "finals_duplicated"]
)
def test_one_bad_count_fails_the_scenario_and_the_summary(field: str) -> None:
    good, bad = Tally("a", started=2, finished=2), Tally("b", started=1, finished=1)
    setattr(bad, field, 1)
    assert good.ok and not bad.ok
    assert "FAILED" in bad.line()
    assert summary([good, bad, Tally("secrets in logs")], seed=1).endswith("-> FAIL (b)")


def test_an_unfinished_run_or_a_problem_fails_the_scenario() -> None:
    assert not Tally("a", started=2, finished=1).ok
    assert not Tally("a", problems=["refused but something was created"]).ok


def test_fuzzed_inputs_are_the_same_for_the_same_seed_and_differ_across_seeds() -> None:
    assert list(cases(7, 200)) == list(cases(7, 200))
    assert list(cases(7, 200)) != list(cases(8, 200))
    assert len(set(cases(7, 600))) > 300  # mostly distinct, not a few inputs many times


@pytest.mark.parametrize(
    ("spans", "most"),
    [
        ([], 0),
        ([(0.0, 5.0), (5.0, 9.0)], 1),  # one ends as the next starts: never two at once
        ([(0.0, 5.0), (4.9, 9.0)], 2),
        ([(0.0, 10.0), (1.0, 2.0), (3.0, 4.0), (3.5, 11.0)], 3),
    ],
)
def test_the_audit_counts_the_jobs_that_ran_at_one_instant(
    spans: list[tuple[float, float]], most: int
) -> None:
    assert most_at_once(spans) == most
