"""A waiting run's place in line and the plan's ETA split, as Slack and the CLI show them."""

from __future__ import annotations

import pytest

from daemon.cli.main import describe_plan, describe_run
from daemon.core.quantities import render_place
from daemon.slack.run_messages import plan_summary, progress_reply, run_parent
from tests.fixtures.slack import wire_plan, wire_run


@pytest.mark.parametrize(
    ("position", "text"),
    [
        (1, "1st"),
        (2, "2nd"),
        (3, "3rd"),
        (4, "4th"),
        (11, "11th"),
        (12, "12th"),
        (21, "21st"),
        (112, "112th"),
    ],
)
def test_places_in_line_read_as_people_say_them(position: int, text: str) -> None:
    assert render_place(position) == f"{text} in line"


def test_no_place_zero() -> None:
    with pytest.raises(ValueError, match="start at 1"):
        render_place(0)


def test_a_waiting_runs_card_says_its_place_in_line() -> None:
    card = run_parent(wire_run(state="queued", queue_position=2))

    states = [f["text"] for block in card.blocks for f in block.get("fields", []) if "State" in f["text"]]
    assert states == ["*State*\n:hourglass_flowing_sand: queued, 2nd in line"]


def test_a_waiting_runs_progress_message_says_its_place_and_why() -> None:
    text = progress_reply(wire_run(state="queued", queue_position=1)).text

    assert text.startswith(":hourglass_flowing_sand: Queued, 1st in line: it starts when a running job ends")


def test_a_launched_run_shows_no_place() -> None:
    text = progress_reply(wire_run(state="submitted", queue_position=None)).text

    assert "in line" not in text and "Starting" in text


def test_the_card_shows_the_plans_eta_start_up_included() -> None:
    view = wire_run(state="queued", eta_s=26.0)

    assert view.eta_s == 26.0  # not 600 rows / 100/s = 6 s


def test_the_plan_shows_its_eta_split_into_start_up_and_publishing() -> None:
    plan = wire_plan(eta_s=27.0, eta_startup_s=20.0, eta_publish_s=6.0, eta_finish_s=1.0)

    assert plan_summary(plan).text.endswith("about 27s: ~20s to start, ~6.0s to publish, ~1.0s to finish")
    assert describe_plan(plan).endswith("about 27s (~20s to start, ~6s to publish, ~1s to finish)")


def test_status_on_the_command_line_says_the_place_in_line() -> None:
    line = describe_run(wire_run(state="queued", queue_position=3))

    assert "(3rd in line: it starts when a running job ends)" in line
