"""The scenarios: one kind of fault each, then the same audit (tests.scenarios.chaos.audit).

Runs are small on purpose (one or two days of the sample table, a few hundred events at 100/s):
what is under test is the platform's bookkeeping around a job, not Spark's throughput, and small
runs let N be large enough for random kill points to land in every phase of a run's life.
"""

from __future__ import annotations

import contextlib
import random
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import httpx
from confluent_kafka.admin import AdminClient
from sqlalchemy import create_engine, select

from daemon.contract.client import DaemonClient
from daemon.contract.groups import LagOut
from daemon.contract.models import ReplayBody
from daemon.core.errors import ReplayError
from daemon.core.ids import PIPELINE_ID_PATTERN
from store.models import Pipeline, Run
from tests.fixtures.daemon import ADMIN, API_TOKEN, OWNER, DaemonProcess
from tests.fixtures.groups import LAGGING_BY, lagging_group
from tests.fixtures.slack import BotUnderTest, SlashResult
from tests.scenarios.chaos.audit import Tally, audit, max_concurrent_jobs, wait_terminal
from tests.scenarios.chaos.fuzz import ApiCase, SlashCase, cases
from tests.scenarios.chaos.world import World

ACCEPTED = re.compile(r"Accepted as `(r-[0-9a-f]{12})`")
ACK_BUDGET_S = 3.0  # Slack drops a slash command not acknowledged within 3 s
# Topics the platform (or the broker) shares between runs, made by the first accepted run that needs one.
SHARED_TOPIC = re.compile(r"__|replay\.(progress|control|dlq)\b")
BROKEN = ("Traceback", "Internal Server Error", 'File "/')
TWO_DAEMON_CAP = 1  # jobs at once, for both daemons together (the local default on 2 cores)
CRASH_AT_LAUNCH = "after-job-spawn"  # tests.fixtures.crash_points: as Popen returns a job's process


@dataclass(frozen=True)
class Sizes:
    """How hard each scenario pushes: `LONG` for `make chaos`, `SHORT` inside `make test`."""

    kill_runs: int
    restart_runs: int
    slack_runs: int
    crowd: int
    two_daemon_runs: int
    fuzz: int
    launch_kills: int = 1
    slow_calls: int = 50
    down_s: tuple[float, float] = (3.0, 8.0)  # how long the broker or PostgreSQL stays away
    slack_burst: tuple[int, int] = (3, 9)  # failed answers in a row, per method and status (randrange)


LONG = Sizes(
    kill_runs=20, restart_runs=2, slack_runs=5, crowd=50, two_daemon_runs=8, fuzz=600, launch_kills=5
)
SHORT = Sizes(
    kill_runs=2,
    restart_runs=1,
    slack_runs=1,
    crowd=8,
    two_daemon_runs=2,
    fuzz=80,
    down_s=(1.0, 3.0),
    slack_burst=(1, 3),
)


def _day(index: int) -> str:
    return f"2024-01-0{index % 7 + 1}"


def _replay(window: str, tps: int = 100) -> ReplayBody:
    return ReplayBody(source="orders", window=window, tps=tps)


def _submit(client: DaemonClient, count: int, tag: str, tps: int = 100) -> list[str]:
    return [
        client.create_replay(OWNER, _replay(_day(i), tps), idempotency_key=f"chaos-{tag}-{i}").id
        for i in range(count)
    ]


def _wait_confirmed(client: DaemonClient, run_id: str, at_least: int, timeout_s: float = 180) -> None:
    """Until the run is publishing (some events confirmed), so a fault lands mid-run."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = client.get_replay(OWNER, run_id)
        if (run.confirmed or 0) >= at_least or run.state in ("succeeded", "failed", "cancelled"):
            return
        time.sleep(0.3)


def kill_nine(world: World, sizes: Sizes, rng: random.Random) -> Tally:
    """SIGKILL the daemon at random instants while N runs queue, launch, publish and finish."""
    tally = Tally("kill-9 daemon")
    daemon = world.daemon("kill9", database_url=world.postgres.new_database())
    client = daemon.client()
    run_ids = _submit(client, sizes.kill_runs, "kill")
    kills, deadline = 0, time.monotonic() + 60 * sizes.kill_runs
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(2.0, 12.0))
        daemon.kill()
        kills += 1
        time.sleep(rng.uniform(0.0, 1.5))
        daemon.start()
        if len(wait_terminal(client, run_ids, timeout_s=0.1)) == len(run_ids):
            break
    tally.figures["kills"] = kills
    audit(world, tally, client, run_ids)
    return tally


def broker_restart(world: World, sizes: Sizes, rng: random.Random) -> Tally:
    """Stop the broker for a few seconds while a run publishes."""
    tally = Tally("broker restart")
    client = world.daemon("broker").client()
    run_ids = []
    for index in range(sizes.restart_runs):
        run_ids.append(client.create_replay(OWNER, _replay(f"{_day(index)}..{_day(index + 1)}")).id)
        _wait_confirmed(client, run_ids[-1], at_least=30)
        with world.broker.stopped():
            time.sleep(rng.uniform(*sizes.down_s))
    audit(world, tally, client, run_ids)
    return tally


def postgres_restart(world: World, sizes: Sizes, rng: random.Random) -> Tally:
    """Restart the daemon's PostgreSQL while a run publishes."""
    tally = Tally("postgres restart")
    client = world.daemon("postgres", database_url=world.postgres.new_database()).client()
    run_ids = []
    for index in range(sizes.restart_runs):
        run_ids.append(client.create_replay(OWNER, _replay(f"{_day(index)}..{_day(index + 1)}")).id)
        _wait_confirmed(client, run_ids[-1], at_least=30)
        world.postgres.restart(down_s=rng.uniform(*sizes.down_s))
    audit(world, tally, client, run_ids)
    return tally


def slack_bursts(world: World, sizes: Sizes, rng: random.Random) -> Tally:
    """Slack answers bursts of 429 (Retry-After) and 500 while runs post their threads."""
    tally = Tally("slack 429/500")
    client = world.daemon("slack").client()
    bursts = 0
    for method in ("chat.postMessage", "chat.update", "files.getUploadURLExternal"):
        for status in (429, 500):
            times = rng.randrange(*sizes.slack_burst)
            world.slack.fail_next(method, times, status=status)
            bursts += times
    run_ids = _submit(client, sizes.slack_runs, "slack", tps=300)
    _wait_confirmed(client, run_ids[0], at_least=1)
    world.slack.fail_next("chat.postMessage", rng.randrange(*sizes.slack_burst), status=429)  # a second wave
    tally.figures["failed_answers"] = bursts
    audit(world, tally, client, run_ids)
    return tally


def _timed_slash(bot: BotUnderTest, text: str, user: str) -> tuple[SlashResult, float]:
    started = time.monotonic()
    result = bot.slash(text, user=user)
    return result, time.monotonic() - started


def _answer(bot: BotUnderTest, result: SlashResult, *, reply_expected: bool) -> str | None:
    """What the user saw: the ack's own text and the replies through the response_url (a command
    with an empty ack always gets one; a refusal the grammar saw at once is the ack alone)."""
    ack = str(result.ack.get("text") or "")
    try:
        wait_s = 30.0 if reply_expected or not ack else 0.1
        replies = [str(reply.get("text", "")) for reply in bot.replies(result.key, timeout_s=wait_s)]
    except TimeoutError:
        replies = []
    return " ".join([ack, *replies]) if ack or replies else None


def _cancel(client: DaemonClient, run_ids: list[str]) -> None:
    for run_id in run_ids:
        with contextlib.suppress(ReplayError):  # already over: nothing to cancel
            client.cancel_replay(ADMIN, run_id)


def crowd(world: World, sizes: Sizes, rng: random.Random) -> Tally:
    """N people type `/replay` at once: each gets an ack in Slack's 3 s and one answer; one run each."""
    tally = Tally("slash crowd")
    users = [f"U0CHAOS{index:03d}" for index in range(sizes.crowd)]
    daemon = world.daemon("crowd", owners=users)  # each of them may replay `orders`
    bot, client = world.bot(daemon), daemon.client()
    with ThreadPoolExecutor(sizes.crowd) as pool:
        sent = list(
            pool.map(lambda i: _timed_slash(bot, f"orders {_day(i)} tps=1000", users[i]), range(sizes.crowd))
        )
    late = [
        f"{seconds:.2f}s"
        for result, seconds in sent
        if result.response.status_code != 200 or seconds > ACK_BUDGET_S
    ]
    if late:
        tally.problems.append(f"{len(late)} acks failed or came after {ACK_BUDGET_S}s: {late[:5]}")
    accepted, refused = [], 0
    for result, _ in sent:
        answer = _answer(bot, result, reply_expected=True)
        if answer is None:
            tally.problems.append(f"a slash command got no answer: {result.key}")
        elif found := ACCEPTED.search(answer):
            accepted.append(found[1])
        else:
            refused += 1
    if not accepted:
        tally.problems.append("no command was accepted: the crowd tested nothing")
    rng.shuffle(accepted)
    keep = max(1, len(accepted) // 4) if len(accepted) > 8 else 1  # the rest are cancelled while they queue
    _cancel(client, accepted[keep:])
    created = {run.id for run in client.list_replays(ADMIN, limit=200).runs}
    if created != set(accepted):
        tally.problems.append(f"{len(created)} runs exist for {len(accepted)} accepted commands")
    slowest = max(seconds for _, seconds in sent)
    tally.figures.update({"commands": sizes.crowd, "refused": refused, "slowest_ack_s": f"{slowest:.2f}"})
    audit(world, tally, client, accepted, timeout_s=60.0 * sizes.crowd)
    return tally


def two_daemons(world: World, sizes: Sizes, rng: random.Random) -> Tally:
    """Two daemons on one PostgreSQL are asked for replays at once, through both; one is killed and
    comes back. At no instant may more jobs run than the cap, counted from the jobs' own records."""
    tally = Tally("two daemons")
    url = world.postgres.new_database()
    cap = {"REPLAY_LOCAL_MAX_CONCURRENT_RUNS": str(TWO_DAEMON_CAP)}
    first = world.daemon("two-a", database_url=url, extra=cap)
    second = world.daemon("two-b", database_url=url, extra=cap)
    clients = [first.client(), second.client()]

    def ask(index: int) -> str:
        body = _replay(_day(index))
        return clients[index % 2].create_replay(OWNER, body, idempotency_key=f"chaos-two-{index}").id

    with ThreadPoolExecutor(sizes.two_daemon_runs) as pool:
        run_ids = list(pool.map(ask, range(sizes.two_daemon_runs)))
    _wait_confirmed(clients[1], run_ids[0], at_least=1)
    first.kill()
    time.sleep(rng.uniform(1.0, 5.0))
    first.start()
    audit(world, tally, clients[1], run_ids)
    most = max_concurrent_jobs([first, second])
    if most > TWO_DAEMON_CAP:
        tally.problems.append(f"{most} jobs ran at once; the cap is {TWO_DAEMON_CAP}")
    tally.figures["max_concurrent_jobs"] = most
    return tally


def _existing(daemon: DaemonProcess) -> tuple[dict[str, str | None], set[str]]:
    """The run ids in the daemon's store, each with the pipeline that scheduled it (None: a replay),
    and the pipeline ids."""
    engine = create_engine(f"sqlite:///{daemon.state_dir / 'replay.db'}")
    try:
        with engine.connect() as conn:
            runs = {row.id: row.pipeline_id for row in conn.execute(select(Run.id, Run.pipeline_id)).all()}
            return runs, set(conn.scalars(select(Pipeline.id)))
    finally:
        engine.dispose()


def fuzz(world: World, sizes: Sizes, rng: random.Random) -> Tally:
    """Hostile commands and API bodies: never a 5xx or a stack trace, and a refusal changes nothing.

    "Nothing" is checked by attribution rather than by counting around each request (accepted runs
    launch in the background and make topics meanwhile): every run, pipeline and topic that exists at
    the end must belong to an input that was accepted and said so (topics shared by all runs, such as
    the progress topic, excepted)."""
    tally = Tally("fuzzed input")
    daemon = world.daemon("fuzz")
    bot, client = world.bot(daemon), daemon.client()
    admin = AdminClient({"bootstrap.servers": world.bootstrap})
    topics_before = set(admin.list_topics(timeout=10).topics)
    headers = {
        "Authorization": f"Bearer {API_TOKEN}",
        "X-Replay-Actor": OWNER,
        "Content-Type": "application/json",
    }
    slashes: list[SlashResult] = []
    runs: list[str] = []
    pipelines: set[str] = set()
    statuses: dict[int, int] = {}
    with httpx.Client(base_url=daemon.url, headers=headers, timeout=30) as http:
        for case in cases(rng.randrange(2**32), sizes.fuzz):
            if isinstance(case, SlashCase):
                result, seconds = _timed_slash(bot, case.text, OWNER)
                slashes.append(result)
                if result.response.status_code != 200 or seconds > ACK_BUDGET_S:
                    tally.problems.append(
                        f"slash {case.text[:60]!r}: ack {result.response.status_code} in {seconds:.1f}s"
                    )
                continue
            assert isinstance(case, ApiCase)
            response = http.post(case.path, content=case.body)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            if response.status_code >= 500 or any(mark in response.text for mark in BROKEN):
                tally.problems.append(
                    f"{case.path} {case.body[:80]!r}: {response.status_code} {response.text[:200]}"
                )
            elif response.status_code in (200, 201) and case.path == "/v1/replays":
                runs.append(response.json()["id"])
                _cancel(client, runs[-1:])  # accepted: stop it before it costs a Spark job
            elif response.status_code in (200, 201) and case.path == "/v1/pipelines":
                pipelines.add(response.json()["id"])
    time.sleep(5.0)  # replies that follow an ack with text arrive within this, or never
    for result in slashes:
        text = _answer(bot, result, reply_expected=False)
        if text is None:
            tally.problems.append(f"a slash command got no answer: {result.key}")
            continue
        if any(mark in text for mark in BROKEN):
            tally.problems.append(f"a slash answer shows a stack trace: {text[:200]}")
        if found := ACCEPTED.search(text):
            runs.append(found[1])
        pipelines.update(PIPELINE_ID_PATTERN.findall(text))
    stored_runs, _ = _existing(daemon)
    scheduled = sorted(run for run, pipeline in stored_runs.items() if pipeline in pipelines)
    _cancel(client, [*runs, *scheduled])  # an accepted pipeline's slot may have fired meanwhile
    stored_runs, stored_pipelines = _existing(daemon)
    accepted_ids = set(runs) | pipelines
    unexplained = [
        *sorted(run for run, made_by in stored_runs.items() if run not in runs and made_by not in pipelines),
        *sorted(stored_pipelines - pipelines),
        *sorted(
            topic
            for topic in set(admin.list_topics(timeout=10).topics) - topics_before
            if not SHARED_TOPIC.match(topic) and not any(accepted in topic for accepted in accepted_ids)
        ),
    ]
    if unexplained:
        tally.problems.append(f"created though no accepted input asked for them: {unexplained[:10]}")
    tally.figures.update(
        {
            "inputs": sizes.fuzz,
            "http": ",".join(f"{code}x{n}" for code, n in sorted(statuses.items())),
            "pipelines": len(pipelines),
            "scheduled_runs": len(scheduled),
        }
    )
    audit(world, tally, client, runs)
    return tally


def launch_kill(world: World, sizes: Sizes, rng: random.Random) -> Tally:
    """SIGKILL the daemon the instant it spawned a run's Spark job, before it recorded anything; the
    daemon that comes back must find that job, not start a second (ADR 0030)."""
    tally = Tally("kill at launch")
    # the cold spawn is under test: a standby driver would take the run without one
    daemon = world.daemon("launch-kill", crash_point=CRASH_AT_LAUNCH, extra={"REPLAY_LOCAL_STANDBY": "false"})
    client = daemon.client()
    run_ids: list[str] = []
    for index in range(sizes.launch_kills):
        if index:
            daemon.stop()
            daemon.start(crash_point=CRASH_AT_LAUNCH)
        body = _replay(_day(index))
        run_ids.append(client.create_replay(OWNER, body, idempotency_key=f"chaos-launch-{index}").id)
        if not daemon.crashed(timeout_s=120):
            tally.problems.append(f"the daemon did not die as it launched {run_ids[-1]}")
        time.sleep(rng.uniform(0.0, 1.0))
        daemon.start()
        wait_terminal(client, run_ids[-1:], timeout_s=300)
    tally.figures["kills"] = len(run_ids)
    audit(world, tally, client, run_ids)
    return tally


def stalled_api(world: World, sizes: Sizes, rng: random.Random) -> Tally:
    """N people ask for a consumer group's lag over a long sample at once; meanwhile the health
    check and an ordinary route each answer in under a second, and every call gets its answer."""
    tally = Tally("slow calls")
    users = [f"U0SLOW{index:03d}" for index in range(sizes.slow_calls)]
    daemon = world.daemon("slow", extra={"REPLAY_MAX_SLOW_CALLS": str(sizes.slow_calls)})
    group, topic = lagging_group(world.bootstrap)
    client = daemon.client()
    sample_s = 8.0
    with ThreadPoolExecutor(sizes.slow_calls) as pool:
        asked = [
            pool.submit(_timed, partial(client.group_lag, user, group, topic=topic, sample_s=sample_s))
            for user in users
        ]
        time.sleep(2.0)  # every call is in, sampling or waiting for its second sample
        health = [_timed(client.health)[1] for _ in range(5)]
        ordinary = [_timed(partial(client.sources, OWNER))[1] for _ in range(5)]
        answers = [future.result() for future in asked]
    failed = [repr(answer)[:120] for answer, _ in answers if not isinstance(answer, LagOut)]
    if failed:
        tally.problems.append(f"{len(failed)} lag calls got no lag: {failed[:3]}")
    if max(health) >= 1.0 or max(ordinary) >= 1.0:
        tally.problems.append(f"waited behind the slow calls: healthz {health}, sources {ordinary}")
    after, _ = _timed(partial(client.group_lag, users[0], group, topic=topic, sample_s=0))
    if not isinstance(after, LagOut) or after.total_lag != LAGGING_BY:  # every call was let go
        tally.problems.append(f"a lag call after the crowd: {after!r}"[:200])
    tally.figures.update(
        {
            "calls": len(answers),
            "healthz_max_s": f"{max(health):.3f}",
            "sources_max_s": f"{max(ordinary):.3f}",
            "slowest_lag_s": f"{max(seconds for _, seconds in answers):.1f}",
        }
    )
    return tally


def _timed(call: Callable[[], object]) -> tuple[object, float]:
    """What ``call`` answered (or the error it raised) and how long it took."""
    started = time.monotonic()
    try:
        answer: object = call()
    except Exception as exc:  # an error is an answer here: the scenario reports it
        answer = exc
    return answer, time.monotonic() - started


SCENARIOS: dict[str, Callable[[World, Sizes, random.Random], Tally]] = {
    "kill": kill_nine,
    "broker": broker_restart,
    "postgres": postgres_restart,
    "slack": slack_bursts,
    "crowd": crowd,
    "two-daemons": two_daemons,
    "fuzz": fuzz,
    "launch-kill": launch_kill,
    "slow-calls": stalled_api,
}
