"""The pages as HTML, from wire models: escaping, unknown never shown as 0, rate changes listed, and
the console's filters kept as chosen."""

from __future__ import annotations

from datetime import UTC, datetime

from daemon.contract.models import ListedIdOut, RateChangeOut, ReconcileOut, VerdictIdsOut
from daemon.core.partitions import PartitionProgress, Partitions, PartitionState
from daemon.core.reconcile import IdList
from daemon.pages.views import (
    Countdown,
    Listed,
    RunFilter,
    console_page,
    ids_page,
    pipeline_page,
    refused_page,
    run_page,
)
from tests.fixtures.slack import changed, wire_pipeline
from tests.fixtures.slack_messages import RUN

PIPELINE = wire_pipeline()


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


def test_each_partition_has_its_line_and_an_unsaid_row_count_is_unknown() -> None:
    at = datetime(2024, 1, 1, 10, 0, tzinfo=UTC)
    lines = (
        PartitionProgress(0, 200, 50, 1, PartitionState.SENDING),
        PartitionProgress(1, None, 70, 2, PartitionState.FAILED),
    )

    page = run_page(RUN, [], user="U0OWNER1", partitions=Partitions(at, lines))

    assert "<tr><td>0</td><td>50</td><td>200</td>" in page and "25%" in page
    assert "<tr><td>1</td><td>70</td><td>unknown</td>" in page and "<td>2</td><td>failed</td>" in page
    assert "As their beacons said at 2024-01-01 10:00:00 UTC" in page
    assert "No partition has reported yet" in run_page(RUN, [], user="U0OWNER1")


def test_a_verdicts_lists_open_with_their_first_ids_and_lead_to_every_one() -> None:
    at = datetime(2024, 1, 1, tzinfo=UTC)
    verdict = ReconcileOut(at=at, selected=200_000, found=40, missing=199_960, unexpected=0, duplicates=0)
    listed = Listed(
        counts={IdList.MISSING: 100_000, IdList.UNEXPECTED: 0, IdList.DUPLICATED: 0},
        first={IdList.MISSING: [ListedIdOut(event_id="e-<1>", records=0)]},
    )

    page = run_page(changed(RUN, reconcile=verdict), [], user="U0OWNER1", listed=listed)

    assert "100,000 listed: the first 100,000 by id of 199,960, all a verdict lists" in page
    assert f'href="/runs/{RUN.id}/ids/missing.csv"' in page and f'href="/runs/{RUN.id}/ids/missing"' in page
    assert "<code>e-&lt;1&gt;</code>" in page
    assert "/ids/unexpected" not in page  # an empty list is not offered


def test_a_list_page_numbers_its_ids_and_offers_the_next_page_only_when_there_is_one() -> None:
    ids = [ListedIdOut(event_id=f"e-{n}", records=2) for n in range(3)]
    middle = VerdictIdsOut(run_id=RUN.id, kind=IdList.DUPLICATED, listed=9, ids=ids, next_after=5)
    last = VerdictIdsOut(run_id=RUN.id, kind=IdList.DUPLICATED, listed=9, ids=ids, next_after=None)

    page = ids_page(RUN, middle, user="U0OWNER1", first=3)

    assert "These are 4 to 6." in page and "<td>4</td><td><code>e-0</code></td><td>2</td>" in page
    assert f'href="/runs/{RUN.id}/ids/duplicated?after=5" rel="next"' in page and "First page" in page
    assert 'rel="next"' not in ids_page(RUN, last, user="U0OWNER1", first=6)


def test_a_pipelines_page_says_when_it_turns_idle_or_is_removed() -> None:
    at = datetime(2024, 2, 1, 9, 0, tzinfo=UTC)

    active = pipeline_page(PIPELINE, [RUN], [], user="U0OWNER1", countdown=Countdown(idle=False, at=at))
    idle = pipeline_page(PIPELINE, [], [], user="U0OWNER1", countdown=Countdown(idle=True, at=at))

    assert "turns idle at 2024-02-01 09:00:00 UTC unless a run publishes first" in active
    assert f'<a href="/runs/{RUN.id}">' in active
    assert "idle: removed at 2024-02-01 09:00:00 UTC unless an owner keeps it" in idle
    assert "No runs yet." in idle


def test_the_console_links_pipelines_and_sources_and_shows_the_idle_clock() -> None:
    at = datetime(2024, 2, 1, 9, 0, tzinfo=UTC)
    page = console_page(
        [], [PIPELINE], [], user="U0OWNER1", chosen=RunFilter(), countdowns={PIPELINE.id: Countdown(True, at)}
    )

    assert f'<a href="/pipelines/{PIPELINE.id}">' in page
    assert "idle: removed 2024-02-01 09:00:00 UTC" in page
