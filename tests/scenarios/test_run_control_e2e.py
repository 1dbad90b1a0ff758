"""Live control over real HTTP: the real daemon, the real broker, the Slack stand-in, the bot and the CLI.

The runs' jobs are `tests.fixtures.control_job`: launched by the local launcher like Spark, they parse
the spec with the job's parser and follow the control topic with the job's own `ControlFeed`, so a
test sees what every task would see, and when. The rate a real Spark job then keeps before and after a
change is measured by the Spark-level test of the pacing timeline.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from daemon.cli.main import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, main
from daemon.contract.client import DaemonClient
from daemon.contract.models import ReplayBody, RunOut
from daemon.core.errors import BadRequest, Conflict, Forbidden
from scripts.devtools.slack_standin import SlackStandin
from spark_job.control import ControlMessage
from spark_job.spec.parse import load_spec
from store import Store
from tests.fixtures.control_job import seen_changes, standin_spark_submit
from tests.fixtures.daemon import ADMIN, OWNER, STRANGER, DaemonProcess, running_daemon
from tests.fixtures.kafka import unique_topic
from tests.fixtures.slack import BOT_TOKEN, CHANNEL, BotUnderTest, serve_bot

pytestmark = [pytest.mark.kafka]

TERMINAL = {"succeeded", "failed", "cancelled"}
LEAD_S = 1.0  # the daemon's default REPLAY_CONTROL_LEAD_S
PICKED_UP_S = 2.0  # the bound: every task has the new rate within this


@pytest.fixture(scope="module")
def control_topic() -> str:
    return unique_topic("replay-control")


@pytest.fixture(scope="module")
def control_daemon(
    tmp_path_factory: pytest.TempPathFactory,
    sample_table: Path,
    kafka_bootstrap: str,
    slack: SlackStandin,
    control_topic: str,
) -> Iterator[DaemonProcess]:
    """One job at a time (so a second run waits, queued), threads posted to the stand-in."""
    tmp = tmp_path_factory.mktemp("replayd-control")
    daemon = running_daemon(
        tmp,
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        extra={
            "REPLAY_SPARK_SUBMIT": str(standin_spark_submit(tmp)),
            "REPLAY_LOCAL_MAX_CONCURRENT_RUNS": "1",
            "REPLAY_CONTROL_TOPIC": control_topic,
            "REPLAY_SLACK_BOT_TOKEN": BOT_TOKEN,
            "REPLAY_SLACK_API_URL": slack.base_url,
            "REPLAY_PROGRESS_NOTIFY_EVERY_S": "1",
            "REPLAY_WATCHER_POLL_S": "0.5",
        },
    )
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def client(control_daemon: DaemonProcess) -> Iterator[DaemonClient]:
    with control_daemon.client() as daemon_client:
        yield daemon_client


@pytest.fixture(scope="module")
def bot(slack: SlackStandin, control_daemon: DaemonProcess) -> Iterator[BotUnderTest]:
    served = serve_bot(slack, control_daemon.url, control_daemon.token, daemon_timeout_s=30.0)
    try:
        yield served
    finally:
        served.server.stop()


def _wait(client: DaemonClient, run_id: str, states: set[str], timeout_s: float = 60.0) -> RunOut:
    deadline = time.monotonic() + timeout_s
    run = client.get_replay(OWNER, run_id)
    while run.state not in states:
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} did not reach {states}: {run}")
        time.sleep(0.2)
        run = client.get_replay(OWNER, run_id)
    return run


@pytest.fixture
def runs(client: DaemonClient) -> Iterator[list[str]]:
    """Runs a test started; each is cancelled and ended afterwards, so the next test's run gets the slot."""
    started: list[str] = []
    yield started
    for run_id in reversed(started):
        if client.get_replay(ADMIN, run_id).state not in TERMINAL:
            client.cancel_replay(ADMIN, run_id)
    for run_id in started:
        _wait(client, run_id, TERMINAL)


def _replay(client: DaemonClient, runs: list[str], tps: int = 100) -> RunOut:
    body = ReplayBody(source="orders", window="2024-01-02..2024-01-03", tps=tps, slack_channel=CHANNEL)
    run = client.create_replay(OWNER, body)
    runs.append(run.id)
    return run


def _running(client: DaemonClient, runs: list[str], tps: int = 100) -> RunOut:
    return _wait(client, _replay(client, runs, tps).id, {"running"})


def _spec_path(daemon: DaemonProcess, run_id: str) -> Path:
    return daemon.state_dir / "runs" / run_id / "spec.json"


def _control_messages(bootstrap: str, topic: str, run_id: str | None = None) -> list[ControlMessage]:
    """Every message on the control topic (of one run, given its id), oldest first."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("read-control")})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        messages: list[ControlMessage] = []
        offset = -1
        deadline = time.monotonic() + 15
        while offset + 1 < end and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            offset = message.offset() or 0
            value = message.value()
            if value is not None and (run_id is None or message.key() == run_id.encode()):
                messages.append(ControlMessage.decode(value))
        return messages
    finally:
        consumer.close()


def _end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("read-control")})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1])
    finally:
        consumer.close()


def _audit(daemon: DaemonProcess, run_id: str) -> list[Any]:
    """The run's live-control audit entries, oldest first."""
    with Store(f"sqlite:///{daemon.state_dir / 'replay.db'}") as store:
        entries = store.audit.list(200, target=run_id)
    return [e for e in reversed(entries) if e.action in ("tps", "pause", "resume")]


def _job_saw(daemon: DaemonProcess, run_id: str, version: int, timeout_s: float) -> dict[str, Any]:
    """The first list of `version` changes the run's job read, waiting at most `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        for line in seen_changes(_spec_path(daemon, run_id)):
            changes = line["changes"]
            assert isinstance(changes, list)
            if len(changes) >= version:
                return line
        if time.monotonic() > deadline:
            raise AssertionError(f"the job of {run_id} did not read version {version} within {timeout_s}s")
        time.sleep(0.05)


def _job_started(daemon: DaemonProcess, run_id: str) -> None:
    """The stand-in job parsed its spec and opened its feed (it touches its file then)."""
    seen = _spec_path(daemon, run_id).parent / "control-seen.jsonl"
    deadline = time.monotonic() + 30
    while not seen.exists():
        assert time.monotonic() < deadline, f"the job of {run_id} did not start"
        time.sleep(0.1)


def test_a_change_to_a_running_run_reaches_its_job_through_the_control_topic_within_two_seconds(
    client: DaemonClient,
    control_daemon: DaemonProcess,
    kafka_bootstrap: str,
    control_topic: str,
    runs: list[str],
) -> None:
    run = _running(client, runs, tps=100)
    _job_started(control_daemon, run.id)

    asked = time.time()
    changed = client.set_tps(OWNER, run.id, 3000)
    job_read = _job_saw(control_daemon, run.id, 1, timeout_s=PICKED_UP_S)

    assert (changed.tps, changed.current_tps, changed.paused) == (100, 3000, False)
    [change] = changed.rate_changes
    assert asked + LEAD_S - 0.5 <= change.at.timestamp() <= time.time() + LEAD_S
    assert float(job_read["seen_at"]) - asked < PICKED_UP_S
    assert job_read["changes"] == [{"at": change.at.timestamp(), "tps": 3000, "paused": False}]

    paused = client.pause_replay(OWNER, run.id)
    _job_saw(control_daemon, run.id, 2, timeout_s=PICKED_UP_S)
    resumed = client.resume_replay(ADMIN, run.id)
    final = _job_saw(control_daemon, run.id, 3, timeout_s=PICKED_UP_S)

    assert (paused.current_tps, paused.paused) == (3000, True)
    assert (resumed.current_tps, resumed.paused) == (3000, False)
    on_topic = _control_messages(kafka_bootstrap, control_topic, run.id)
    assert [m.version for m in on_topic] == [1, 2, 3]
    assert [(c.tps, c.paused) for c in on_topic[-1].changes] == [(3000, False), (3000, True), (3000, False)]
    assert [c["paused"] for c in final["changes"]] == [False, True, False]
    audited = _audit(control_daemon, run.id)
    assert [(e.actor, e.action, e.outcome, e.detail["before"], e.detail["after"]) for e in audited] == [
        (OWNER, "tps", "accepted", "100/s", "3000/s"),
        (OWNER, "pause", "accepted", "3000/s", "paused (resumes at 3000/s)"),
        (ADMIN, "resume", "accepted", "paused (resumes at 3000/s)", "3000/s"),
    ]


def test_refused_changes_leave_the_store_and_the_control_topic_as_they_were(
    client: DaemonClient,
    control_daemon: DaemonProcess,
    kafka_bootstrap: str,
    control_topic: str,
    runs: list[str],
) -> None:
    run = _running(client, runs, tps=100)
    end = _end_offset(kafka_bootstrap, control_topic)

    refusals: list[tuple[Any, type[Exception], str]] = [
        (lambda: client.set_tps(STRANGER, run.id, 500), Forbidden, "only the requester"),
        (lambda: client.pause_replay(STRANGER, run.id), Forbidden, "only the requester"),
        (lambda: client.set_tps(OWNER, run.id, 0), BadRequest, "at least 1"),
        (lambda: client.set_tps(OWNER, run.id, 50_000_000), BadRequest, "maximum of 200000"),
        (lambda: client.set_tps(OWNER, run.id, 100), BadRequest, "already set to 100/s"),
        (lambda: client.resume_replay(OWNER, run.id), Conflict, "is not paused"),
    ]
    for call, error, message in refusals:
        with pytest.raises(error, match=message):
            call()

    client.cancel_replay(OWNER, run.id)
    ended = _wait(client, run.id, TERMINAL)
    with pytest.raises(Conflict, match=f"run {run.id} is cancelled: only a queued, submitted or running"):
        client.pause_replay(OWNER, run.id)

    assert ended.rate_changes == [] and ended.current_tps == 100
    assert _end_offset(kafka_bootstrap, control_topic) == end
    refused = _audit(control_daemon, run.id)
    assert [e.outcome for e in refused] == ["refused"] * (len(refusals) + 1)
    assert refused[0].actor == STRANGER and "only the requester" in refused[0].detail["reason"]


def test_a_run_launched_after_a_change_carries_it_in_its_spec_with_the_offset_after_it(
    client: DaemonClient,
    control_daemon: DaemonProcess,
    kafka_bootstrap: str,
    control_topic: str,
    runs: list[str],
) -> None:
    first = _running(client, runs)
    waiting = _replay(client, runs, tps=200)
    assert client.get_replay(OWNER, waiting.id).state == "queued"  # one job at a time here

    changed = client.set_tps(OWNER, waiting.id, 700)
    after_change = _end_offset(kafka_bootstrap, control_topic)
    client.cancel_replay(OWNER, first.id)
    _wait(client, waiting.id, {"running"})
    _job_started(control_daemon, waiting.id)

    spec = load_spec(str(_spec_path(control_daemon, waiting.id)))
    assert spec.tps == 200 and spec.control is not None
    assert spec.control.topic == control_topic
    assert spec.control.offset == after_change
    assert [(c.at, c.tps, c.paused) for c in spec.control.changes] == [
        (changed.rate_changes[0].at.timestamp(), 700, False)
    ]
    time.sleep(1.0)
    assert seen_changes(_spec_path(control_daemon, waiting.id)) == []  # nothing newer than its spec


def test_the_thread_and_the_bot_tell_each_change_and_the_progress_message_shows_the_pause(
    client: DaemonClient, bot: BotUnderTest, slack: SlackStandin, runs: list[str]
) -> None:
    run = _running(client, runs, tps=1000)
    thread_ts = slack.wait_until(lambda: client.get_replay(OWNER, run.id).slack_ts, what="the run's thread")

    tps = bot.slash(f"tps {run.id} 3k", user=OWNER)
    [told] = bot.replies(tps.key)
    refused = bot.slash(f"pause {run.id}", user=STRANGER)
    [no] = bot.replies(refused.key)
    pause = bot.slash(f"pause {run.id}", user=OWNER)
    bot.replies(pause.key)

    assert tps.response.status_code == 200
    assert f"rate 1,000/s → 3,000/s by <@{OWNER}>" in told["text"]
    assert "only the requester, the source's owners or an admin" in no["text"]
    lines = slack.wait_until(
        lambda: (t := [m.text for m in slack.thread(CHANNEL, thread_ts)]) and len(t) >= 4 and t,
        what="two lines in the thread",
    )
    print("\n".join(lines))
    assert any(f"rate 1,000/s → 3,000/s by <@{OWNER}>, from " in line and " UTC" in line for line in lines)
    assert any(f"paused by <@{OWNER}>" in line for line in lines)
    progress = slack.wait_until(
        lambda: [m for m in slack.thread(CHANNEL, thread_ts) if "paused (resumes at 3,000/s)" in m.text],
        what="the progress message showing the pause",
    )
    assert progress
    assert client.get_replay(OWNER, run.id).paused


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_the_command_line_changes_pauses_and_resumes_a_run(
    client: DaemonClient, control_daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch, runs: list[str]
) -> None:
    monkeypatch.setenv("REPLAY_DAEMON_URL", control_daemon.url)
    monkeypatch.setenv("REPLAY_API_TOKEN", control_daemon.token)
    monkeypatch.setenv("REPLAY_USER", OWNER)
    run = _running(client, runs, tps=100)

    code, out, err = _cli(["tps", run.id, "5k", "--json"])
    assert code == EXIT_OK, err
    answer = json.loads(out)
    assert (answer["tps"], answer["current_tps"], answer["paused"]) == (100, 5000, False)

    code, out, err = _cli(["pause", run.id])
    assert code == EXIT_OK, err
    assert f"{run.id} running" in out and "(paused; resumes at 5000/s)" in out and " UTC" in out

    code, _, err = _cli(["pause", run.id])
    assert code == EXIT_FAILED and "already paused" in err
    code, _, err = _cli(["tps", run.id, "fast"])
    assert code == EXIT_BAD_INPUT and "`fast`" in err

    code, out, err = _cli(["resume", run.id, "--as", ADMIN])
    assert code == EXIT_OK, err
    assert "(now 5000/s)" in out


def test_a_run_paused_past_the_limit_is_cancelled_with_that_reason(
    tmp_path: Path, sample_table: Path, kafka_bootstrap: str
) -> None:
    daemon = running_daemon(
        tmp_path,
        sample_table=sample_table,
        bootstrap=kafka_bootstrap,
        extra={
            "REPLAY_SPARK_SUBMIT": str(standin_spark_submit(tmp_path)),
            "REPLAY_MAX_PAUSE_S": "2",
            "REPLAY_WATCHER_POLL_S": "0.5",
            "REPLAY_CONTROL_TOPIC": unique_topic("replay-control"),
        },
    )
    try:
        with daemon.client() as own:
            run = _running(own, [], tps=100)
            own.pause_replay(OWNER, run.id)
            ended = _wait(own, run.id, TERMINAL, timeout_s=30)
    finally:
        daemon.stop()

    assert ended.state == "cancelled"
    assert ended.failure_reason == "paused for more than 2s (REPLAY_MAX_PAUSE_S): cancelled"
