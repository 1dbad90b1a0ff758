"""A run's final message reaches Slack exactly once, through Slack errors and a daemon's crash.

The watcher runs in this process on the real store (SQLite and PostgreSQL) and the real Slack
notifier posts to the stand-in. Before, the final message was recorded and tried once: a 429 or 500
at that moment, or a crash between recording and sending, lost it for good (found by `make chaos`).
"""

from __future__ import annotations

import time
from pathlib import Path

from daemon.adapters.local_launcher import LocalSparkLauncher
from daemon.adapters.slack_notifier import SlackNotifier
from daemon.core.states import RunKind, RunState
from daemon.runtime.final_messages import final_key
from daemon.runtime.watcher import Watcher, WatcherTiming
from daemon.slack.web_client import make_web_client
from daemon.usecases.ports import Clusters
from scripts.devtools.slack_standin import SlackStandin
from store import Store
from tests.fixtures.progress import NoBeacons
from tests.fixtures.slack import BOT_TOKEN
from tests.scenarios.chaos.audit import FINAL

CHANNEL = "C0FINALS"
RETRY_S = 0.5


def _watcher(store: Store, standin: SlackStandin, tmp_path: Path, owner: str = "d1") -> Watcher:
    return Watcher(
        store=store,
        launcher=LocalSparkLauncher(runs_dir=tmp_path / "runs"),  # never called: the runs never launch
        notifier=SlackNotifier(client=make_web_client(BOT_TOKEN, standin.base_url)),
        build_spec=lambda _run: "{}",
        progress=Clusters.one(NoBeacons()),
        owner=owner,
        timing=WatcherTiming(final_retry_s=RETRY_S),
    )


def _cancelled_run(store: Store) -> str:
    run = store.runs.create(
        kind=RunKind.REPLAY, source="orders", topic="t", tps=1, requester="U1", slack_channel=CHANNEL
    )
    store.runs.transition(run.id, RunState.CANCELLING)
    return run.id


def _finals(standin: SlackStandin) -> list[str]:
    return [m.text for m in standin.messages(CHANNEL) if FINAL.search(m.text)]


def test_a_final_message_slack_refused_is_sent_again_once_slack_is_back(
    store: Store, slack_standin: SlackStandin, tmp_path: Path
) -> None:
    first, second = (
        _watcher(store, slack_standin, tmp_path, "d1"),
        _watcher(store, slack_standin, tmp_path, "d2"),
    )
    run_id = _cancelled_run(store)
    slack_standin.fail_next("chat.postMessage", 100, status=500)

    first.tick()
    assert store.runs.get(run_id).state == RunState.CANCELLED
    assert _finals(slack_standin) == []
    record = store.notifications.get(final_key(run_id))
    assert record is not None and record.delivered_at is None  # recorded, not delivered

    slack_standin.heal("chat.postMessage")
    first.tick()
    assert _finals(slack_standin) == []  # too soon: the retry waits its interval
    time.sleep(RETRY_S + 0.2)
    first.tick()
    second.tick()  # another daemon: the message is reclaimed by one of them only
    time.sleep(RETRY_S + 0.2)
    first.tick()
    second.tick()

    assert len(_finals(slack_standin)) == 1
    delivered = store.notifications.get(final_key(run_id))
    assert delivered is not None and delivered.delivered_at is not None


def test_a_final_message_recorded_by_a_daemon_that_died_before_sending_it_is_sent_by_the_next(
    store: Store, slack_standin: SlackStandin, tmp_path: Path
) -> None:
    run_id = _cancelled_run(store)
    store.runs.transition(run_id, RunState.CANCELLED)
    assert store.notifications.record_once(final_key(run_id), run_id=run_id, kind="final")  # then: SIGKILL

    survivor = _watcher(store, slack_standin, tmp_path)
    survivor.tick()
    assert _finals(slack_standin) == []
    time.sleep(RETRY_S + 0.2)
    survivor.tick()
    survivor.tick()

    assert len(_finals(slack_standin)) == 1
