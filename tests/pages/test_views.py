"""The pages as HTML, from wire models: escaping, unknown never shown as 0, rate changes listed, and
the console's filters kept as chosen."""

from __future__ import annotations

from datetime import UTC, datetime

from daemon.contract.models import RateChangeOut, ReconcileOut
from daemon.pages.views import RunFilter, console_page, refused_page, run_page
from tests.fixtures.slack import changed
from tests.fixtures.slack_messages import RUN


def test_a_runs_page_escapes_what_people_typed_and_says_unknown_not_zero() -> None:
    hostile = changed(RUN, where="status = '<script>alert(1)</script>'", confirmed=None, state="failed")

    page = run_page(hostile, [], user="U0OWNER1")

    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    assert 'id="confirmed">unknown<' in page


def test_rate_changes_and_pauses_are_listed_under_the_chart() -> None:
    at = datetime(2024, 1, 1, 10, 0, tzinfo=UTC)
    steered = changed(
        RUN, rate_changes=[RateChangeOut(at=at, tps=3000), RateChangeOut(at=at, tps=3000, paused=True)]
    )

    page = run_page(steered, [], user="U0OWNER1")

    assert "<td>2024-01-01 10:00:00 UTC</td><td>3,000/s</td>" in page
    assert "paused (resumes at 3,000/s)" in page
    assert 'id="rate-changes"' not in run_page(RUN, [], user="U0OWNER1")


def test_a_clean_verdict_and_a_failed_reconcile_read_differently() -> None:
    at = datetime(2024, 1, 1, tzinfo=UTC)
    clean = ReconcileOut(at=at, selected=3, found=3, missing=0, unexpected=0, duplicates=0)
    failed = ReconcileOut(
        at=at, selected=None, found=None, missing=None, unexpected=None, duplicates=None, error="broker away"
    )

    assert "<strong>Clean</strong>" in run_page(changed(RUN, reconcile=clean), [], user="U0OWNER1")
    assert "could not be done: broker away" in run_page(changed(RUN, reconcile=failed), [], user="U0OWNER1")


def test_the_console_keeps_the_filters_chosen() -> None:
    page = console_page([], [], [], user="U0OWNER1", chosen=RunFilter(state="queued", requester="U0ME"))

    assert '<option value="queued" selected>queued</option>' in page
    assert 'name="requester" value="U0ME"' in page
    assert "No runs like that." in page


def test_the_refusal_names_both_ways_to_a_link_and_no_user() -> None:
    page = refused_page("this link has expired")

    assert "this link has expired" in page and "/replay open" in page and "replay open r-" in page
    assert "signed in as" not in page
