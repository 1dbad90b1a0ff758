"""Times in the requester's zone with UTC beside them: the formatting, the `users.info` lookup and its
cache against the local Slack stand-in, the daemon's notifier, and the bot's answers over signed HTTP.
Windows are never converted: they stay UTC, as typed."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from daemon.adapters.slack_notifier import SlackNotifier
from daemon.contract.models import RunOut
from daemon.slack.user_zones import UserZones
from daemon.slack.web_client import make_web_client
from daemon.slack.zones import clock_time, date_time, zone_named
from scripts.devtools.slack_standin import SlackStandin
from tests.fixtures.daemon_standin import DaemonStandin
from tests.fixtures.slack import BOT_TOKEN, CHANNEL, CREATED, STANDIN_TOKEN, USER, BotUnderTest, wire_run

WINTER = datetime(2024, 1, 15, 9, 0, 5, tzinfo=UTC)
SUMMER = datetime(2024, 7, 15, 9, 0, 5, tzinfo=UTC)


# --- the formatting ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("moment", "zone", "clock", "stamp"),
    [
        (WINTER, "Europe/Paris", "10:00 CET (09:00 UTC)", "2024-01-15 10:00 CET (09:00 UTC)"),
        (SUMMER, "Europe/Paris", "11:00 CEST (09:00 UTC)", "2024-07-15 11:00 CEST (09:00 UTC)"),
        (WINTER, "America/New_York", "04:00 EST (09:00 UTC)", "2024-01-15 04:00 EST (09:00 UTC)"),
        (
            WINTER.replace(hour=20),
            "Asia/Tokyo",
            "Tue 05:00 JST (20:00 UTC)",
            "2024-01-16 05:00 JST (2024-01-15 20:00 UTC)",
        ),
        (WINTER, "Europe/London", "09:00 UTC", "2024-01-15 09:00 UTC"),  # UTC+0: said once
        (WINTER, "UTC", "09:00 UTC", "2024-01-15 09:00 UTC"),
        (WINTER, None, "09:00 UTC", "2024-01-15 09:00 UTC"),  # no zone known
        (WINTER, "Mars/Olympus_Mons", "09:00 UTC", "2024-01-15 09:00 UTC"),  # a zone we cannot read
        (WINTER, "../../etc/passwd", "09:00 UTC", "2024-01-15 09:00 UTC"),
    ],
)
def test_a_time_shows_the_readers_clock_then_utc(
    moment: datetime, zone: str | None, clock: str, stamp: str
) -> None:
    assert clock_time(moment, zone_named(zone)) == clock
    assert date_time(moment, zone_named(zone)) == stamp


def test_seconds_are_shown_on_both_clocks_when_asked() -> None:
    assert clock_time(WINTER, zone_named("Europe/Paris"), seconds=True) == "10:00:05 CET (09:00:05 UTC)"


# --- users.info, through the stand-in -------------------------------------------------------------


@pytest.fixture
def zones(slack_standin: SlackStandin) -> Callable[..., UserZones]:
    def make(*, clock: Callable[[], float] = time.monotonic) -> UserZones:
        return UserZones(make_web_client(BOT_TOKEN, slack_standin.base_url), clock=clock)

    return make


def test_a_users_zone_comes_from_users_info_and_is_asked_once_an_hour(
    slack_standin: SlackStandin, zones: Callable[..., UserZones]
) -> None:
    now = [0.0]
    slack_standin.set_zone(USER, "Europe/Paris")
    lookup = zones(clock=lambda: now[0])

    first, again = lookup.zone(USER), lookup.zone(USER)
    now[0] = 3599.0
    cached = lookup.zone(USER)
    slack_standin.set_zone(USER, "Asia/Tokyo")
    now[0] = 3601.0
    moved = lookup.zone(USER)

    assert str(first) == str(again) == str(cached) == "Europe/Paris"
    assert str(moved) == "Asia/Tokyo"
    assert [c.params["user"] for c in slack_standin.calls("users.info")] == [USER, USER]


def test_a_user_without_a_zone_or_slack_refusing_means_utc_only(
    slack_standin: SlackStandin, zones: Callable[..., UserZones]
) -> None:
    slack_standin.set_zone("U0NOZONE", None)
    slack_standin.fail_next("users.info", error="missing_scope")
    lookup = zones()

    assert lookup.zone("U0REFUSED") is None  # Slack said no: kept for a few minutes, not asked again
    assert lookup.zone("U0REFUSED") is None
    assert lookup.zone("U0NOZONE") is None
    assert lookup.zone("cli-user") is None  # a CLI user name: nobody to ask
    assert [c.params["user"] for c in slack_standin.calls("users.info")] == ["U0REFUSED", "U0NOZONE"]


# --- the daemon's notifier: progress and the final reply ------------------------------------------------


def test_the_run_thread_shows_times_in_the_requesters_zone_and_keeps_the_window_in_utc(
    slack_standin: SlackStandin,
) -> None:
    slack_standin.set_zone(USER, "Europe/Paris")  # CREATED is 10:00 UTC on 2024-05-01: 12:00 CEST
    notifier = SlackNotifier(client=make_web_client(BOT_TOKEN, slack_standin.base_url))
    run = wire_run(started_at=CREATED)
    thread = notifier.run_started(run)
    assert thread is not None
    ended = RunOut.model_validate(
        {
            **run.model_dump(),
            "state": "succeeded",
            "confirmed": 600,
            "ended_at": CREATED + timedelta(minutes=5),
            "slack_ts": thread.ts,
            "slack_progress_ts": thread.progress_ts,
        }
    )

    notifier.run_finished(ended)

    parent, progress, final = slack_standin.thread(CHANNEL, thread.ts)
    assert "Started 2024-05-01 12:00 CEST (10:00 UTC), ended 12:05 CEST (10:05 UTC)." in final.text
    # read now: past 23:00 UTC it is already tomorrow in Paris, and the weekday says so
    updated = r"updated (?:[A-Z][a-z]{2} )?\d\d:\d\d:\d\d CES?T \(\d\d:\d\d:\d\d UTC\)$"
    assert re.search(updated, progress.text), progress.text
    assert "`2024-01-01..2024-01-02` (UTC)" in repr(parent.blocks)  # the window as typed, in UTC
    assert len(slack_standin.calls("users.info")) == 1


def test_a_requester_whose_zone_is_unknown_sees_utc_only(slack_standin: SlackStandin) -> None:
    slack_standin.set_zone(USER, None)
    notifier = SlackNotifier(client=make_web_client(BOT_TOKEN, slack_standin.base_url))
    run = wire_run(
        state="succeeded", started_at=CREATED, ended_at=CREATED + timedelta(minutes=5), confirmed=600
    )

    notifier.run_finished(run)

    _, final = slack_standin.messages(CHANNEL)
    assert "Started 2024-05-01 10:00 UTC, ended 10:05 UTC." in final.text


# --- the bot: /replay status over signed HTTP ----------------------------------------------------


@pytest.fixture
def bot(start_bot: Callable[..., BotUnderTest], daemon_standin: DaemonStandin) -> BotUnderTest:
    finished = wire_run(
        state="succeeded", started_at=CREATED, ended_at=CREATED + timedelta(minutes=5), confirmed=600
    )
    daemon_standin.runs[finished.id] = finished.model_dump(mode="json")
    return start_bot(daemon_standin.url, STANDIN_TOKEN, daemon_timeout_s=5.0)


@pytest.mark.parametrize(
    ("zone", "shown"),
    [
        ("America/Los_Angeles", "Started 2024-05-01 03:00 PDT (10:00 UTC), ended 03:05 PDT (10:05 UTC)."),
        (None, "Started 2024-05-01 10:00 UTC, ended 10:05 UTC."),
    ],
)
def test_status_shows_the_askers_clock(bot: BotUnderTest, zone: str | None, shown: str) -> None:
    bot.standin.set_zone(USER, zone)

    [reply] = bot.replies(bot.slash("status r-0123456789ab").key)

    assert shown in repr(reply["blocks"])
    assert [c.params["user"] for c in bot.standin.calls("users.info")] == [USER]
