"""The Notifier port's contract, held by each implementation (Slack, against the local Web API
stand-in, and the log): the same calls in the order the watcher, the pipelines and the janitor make
them, the same kinds of answers, `delivered` called exactly once for a delivered final word."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from structlog.testing import capture_logs

from daemon.adapters.log_notifier import LogNotifier
from daemon.adapters.slack_notifier import SlackNotifier
from daemon.contract.models import GroupDrainOut, IdlePrompt, RateSeriesOut, ReconcileOut
from daemon.core.drain import DrainStage
from daemon.slack.web_client import make_web_client
from daemon.usecases.ports import Notifier, RunThread
from scripts.devtools.slack_standin import SlackStandin
from tests.fixtures.slack import BOT_TOKEN, CREATED, USER, changed, wire_pipeline, wire_run

NOTIFIERS = ("slack", "log")


@pytest.fixture(params=NOTIFIERS)
def notifier(request: pytest.FixtureRequest) -> Iterator[Notifier]:
    if request.param == "log":
        yield LogNotifier()
        return
    standin: SlackStandin = request.getfixturevalue("slack_standin")
    yield SlackNotifier(client=make_web_client(BOT_TOKEN, standin.base_url), default_channel="C0PLATFORM")


def _threaded(run_thread: RunThread | None) -> dict[str, object]:
    if run_thread is None:
        return {}
    return {
        "slack_channel": run_thread.channel,
        "slack_ts": run_thread.ts,
        "slack_progress_ts": run_thread.progress_ts,
    }


def test_a_runs_whole_life_is_told_and_its_final_word_marked_delivered_once(notifier: Notifier) -> None:
    run = wire_run(started_at=CREATED)

    thread = notifier.run_started(run)

    assert thread is None or isinstance(thread, RunThread)
    going = changed(run, state="running", **_threaded(thread))
    notifier.run_state_changed(going)
    notifier.run_progress(going, rate=98.5)
    notifier.run_progress(going, rate=None)  # before a second sample the rate is unknown
    notifier.run_rate_changed(changed(going, current_tps=50), actor=USER, reason=None)
    marks: list[str] = []
    done = changed(
        going,
        state="succeeded",
        confirmed=600,
        rows_selected=600,
        ended_at=CREATED + timedelta(seconds=7),
        reconcile=ReconcileOut(at=CREATED, selected=600, found=600, missing=0, unexpected=0, duplicates=0),
    )
    series = RateSeriesOut(start=CREATED, counts=[100] * 6, target_tps=100)

    notifier.run_finished(done, series, delivered=lambda: marks.append("delivered"))

    assert marks == ["delivered"]
    notifier.run_reconciled(done)


def test_a_watch_and_a_topics_expiry_answer_where_they_went(notifier: Notifier) -> None:
    run = wire_run(started_at=CREATED)
    run = changed(run, **_threaded(notifier.run_started(run)))
    watched = changed(
        run,
        state="succeeded",
        watch=[
            GroupDrainOut(group="billing", state=DrainStage.WATCHING, baseline=10, lag=400, last_at=CREATED)
        ],
    )

    posted = notifier.watch_started(watched)

    assert posted is None or isinstance(posted, str)
    if posted is not None:
        notifier.watch_progress(watched, message_ts=posted)
    notifier.watch_concluded(watched, "billing")
    for deletes_at in (CREATED + timedelta(days=7), None):
        where = notifier.topic_expiry(watched, deletes_at=deletes_at)
        assert isinstance(where, str) and where


def test_pipelines_and_idle_questions_answer_where_they_went(notifier: Notifier) -> None:
    pipeline = wire_pipeline()

    thread = notifier.pipeline_scheduled(pipeline)

    assert thread is None or isinstance(thread, str)
    prompt = IdlePrompt(
        pipeline=pipeline, idle_since=CREATED, deadline=CREATED + timedelta(days=7), keep_days=30
    )
    asked = notifier.idle_prompt(prompt, USER)
    told = notifier.pipeline_removed(pipeline, USER, ["topic replay.orders.p-1"], "idle for 30 days")
    assert all(isinstance(where, str) and where for where in (asked, told))


def test_the_log_notifier_says_each_thing_it_was_told() -> None:
    # the log is an install's only record when it has no Slack: every call leaves a line
    notifier = LogNotifier()
    run = wire_run()
    calls: list[Callable[[], object]] = [
        lambda: notifier.run_started(run),
        lambda: notifier.run_state_changed(run),
        lambda: notifier.run_progress(run, rate=1.0),
        lambda: notifier.run_finished(changed(run, state="failed", failure_reason="boom")),
        lambda: notifier.run_reconciled(run),
        lambda: notifier.pipeline_scheduled(wire_pipeline()),
    ]
    for call in calls:
        with capture_logs() as logged:
            call()
        assert logged and all(entry["event"].startswith("notify") for entry in logged), logged
