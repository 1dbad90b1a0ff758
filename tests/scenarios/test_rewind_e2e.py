"""`rewind` and `lag` through the real Replay Service (HTTP API and the `replay` CLI) on the real broker:
preview then apply, owners and admins only, audited with the offsets before and after, refused while
the group has members (by us first, by Kafka in a race), a retried apply moves nothing twice, and
`plan` offers the rewind while the window is still on the live topic."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer

from daemon.adapters.kafka_consumer_group_admin import KafkaConsumerGroupAdmin
from daemon.cli.main import EXIT_FAILED, EXIT_OK, main
from daemon.contract.groups import RewindBody
from daemon.contract.models import ReplayBody
from daemon.core.errors import Conflict, Forbidden, GroupHasMembers
from daemon.core.grammar import RewindCommand, parse
from store import Store
from tests.fixtures.daemon import ADMIN, NO_JOBS, OWNER, STRANGER, DaemonProcess
from tests.fixtures.groups import (
    FIRST,
    PARTITIONS,
    PER_PARTITION,
    behind_group,
    committed,
    consume_and_commit,
    produce,
)

pytestmark = [pytest.mark.kafka, NO_JOBS]

# The live topic's records: record i of every partition is stamped FIRST + i seconds.


@pytest.fixture(scope="module")
def live_topic(replay_daemon: DaemonProcess, kafka_bootstrap: str) -> str:
    """The `orders` source's live topic (3 partitions), filled with timestamped records once."""
    catalog = yaml.safe_load(Path(replay_daemon.env["REPLAY_CATALOG_PATH"]).read_text())
    topic = str(catalog["sources"]["orders"]["live_topic"])
    produce(kafka_bootstrap, topic, PER_PARTITION, start_ms=int(FIRST.timestamp() * 1000))
    return topic


@pytest.fixture
def member(kafka_bootstrap: str, live_topic: str) -> Iterator[str]:
    """A group with one active member (subscribed, polling); yields the group id."""
    group = behind_group(kafka_bootstrap, live_topic)
    stop, assigned = threading.Event(), threading.Event()

    def consume() -> None:
        consumer = Consumer(
            {"bootstrap.servers": kafka_bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        consumer.subscribe([live_topic])
        try:
            while not stop.is_set():
                consumer.poll(0.2)
                if consumer.assignment():
                    assigned.set()
        finally:
            consumer.close()

    worker = threading.Thread(target=consume)
    worker.start()
    assert assigned.wait(30), "the member never got its partitions"
    yield group
    stop.set()
    worker.join(30)


def test_a_preview_shows_every_partition_and_moves_nothing_then_applying_moves_and_audits(
    replay_daemon: DaemonProcess, kafka_bootstrap: str, live_topic: str
) -> None:
    group = behind_group(kafka_bootstrap, live_topic)
    body = RewindBody(topic=live_topic, to="2024-01-03T00:00:10")

    with replay_daemon.client() as client:
        shown = client.rewind(OWNER, group, body)
        assert committed(kafka_bootstrap, group, live_topic) == {0: 30, 1: 35, 2: 40}
        done = client.rewind(OWNER, group, body.model_copy(update={"preview": False}), idempotency_key="k-1")

    assert [(m.partition, m.current, m.new, m.re_consumed) for m in shown.moves] == [
        (0, 30, 10, 20),
        (1, 35, 10, 25),
        (2, 40, 10, 30),
    ]
    assert (shown.re_consumed, shown.applied, shown.blocked, shown.state) == (75, False, None, "empty")
    assert done.applied and done.moves == shown.moves
    assert committed(kafka_bootstrap, group, live_topic) == {0: 10, 1: 10, 2: 10}
    with Store(f"sqlite:///{replay_daemon.state_dir / 'replay.db'}") as store:
        [entry] = [e for e in store.audit.list(actor=OWNER, target=group) if e.action == "rewind"]
    assert entry.outcome == "accepted"
    assert entry.detail["before"] == {"0": 30, "1": 35, "2": 40}
    assert entry.detail["after"] == {"0": 10, "1": 10, "2": 10}
    assert (entry.detail["topic"], entry.detail["to"]) == (live_topic, "2024-01-03T00:00:10")


def test_a_retried_apply_with_the_same_key_moves_nothing_again(
    replay_daemon: DaemonProcess, kafka_bootstrap: str, live_topic: str
) -> None:
    group = behind_group(kafka_bootstrap, live_topic)
    apply = RewindBody(topic=live_topic, to="earliest", preview=False)
    with replay_daemon.client() as client:
        first = client.rewind(ADMIN, group, apply, idempotency_key="same-click")
        consume_and_commit(kafka_bootstrap, live_topic, group, {0: 5, 1: 5, 2: 5})  # the consumer moved on
        second = client.rewind(ADMIN, group, apply, idempotency_key="same-click")

    assert first.applied and first.re_consumed == 105
    assert (second.applied, second.repeated) == (False, True)
    assert [m.new for m in second.moves] == [0, 0, 0]
    assert committed(kafka_bootstrap, group, live_topic) == {0: 5, 1: 5, 2: 5}


def test_a_forward_move_is_counted_negative(
    replay_daemon: DaemonProcess, kafka_bootstrap: str, live_topic: str
) -> None:
    group = behind_group(kafka_bootstrap, live_topic)
    with replay_daemon.client() as client:
        shown = client.rewind(OWNER, group, RewindBody(topic=live_topic, to="latest"))

    assert [m.new for m in shown.moves] == [PER_PARTITION] * PARTITIONS
    assert shown.re_consumed == -(10 + 5 + 0)


def test_only_owners_of_the_live_topic_or_admins_may_rewind_and_a_refusal_is_audited(
    replay_daemon: DaemonProcess, kafka_bootstrap: str, live_topic: str
) -> None:
    group = behind_group(kafka_bootstrap, live_topic)
    with replay_daemon.client() as client, pytest.raises(Forbidden, match="owners of the sources"):
        client.rewind(STRANGER, group, RewindBody(topic=live_topic, to="earliest", preview=False))

    assert committed(kafka_bootstrap, group, live_topic) == {0: 30, 1: 35, 2: 40}
    with Store(f"sqlite:///{replay_daemon.state_dir / 'replay.db'}") as store:
        entries = [e for e in store.audit.list(actor=STRANGER, target=group) if e.action == "rewind"]
    assert [e.outcome for e in entries] == ["refused"]


def test_a_group_with_active_members_is_refused_with_a_clear_message(
    replay_daemon: DaemonProcess, kafka_bootstrap: str, live_topic: str, member: str
) -> None:
    body = RewindBody(topic=live_topic, to="earliest")
    with replay_daemon.client() as client:
        shown = client.rewind(OWNER, member, body)
        with pytest.raises(Conflict, match="1 active member: stop its consumers first"):
            client.rewind(OWNER, member, body.model_copy(update={"preview": False}))

    assert shown.blocked is not None and shown.active_members == 1 and shown.state == "stable"
    assert committed(kafka_bootstrap, member, live_topic) == {0: 30, 1: 35, 2: 40}


def test_kafkas_own_refusal_in_a_race_is_translated_to_the_same_error(
    kafka_bootstrap: str, live_topic: str, member: str
) -> None:
    admin = KafkaConsumerGroupAdmin(config={"bootstrap.servers": kafka_bootstrap})

    with pytest.raises(GroupHasMembers, match="has active members"):
        admin.alter_offsets(member, live_topic, {0: 0})  # past our own check, straight to Kafka

    assert committed(kafka_bootstrap, member, live_topic)[0] == 30


def test_plan_offers_the_rewind_while_the_window_is_still_on_the_live_topic(
    replay_daemon: DaemonProcess, live_topic: str
) -> None:
    with replay_daemon.client() as client:
        retained = client.plan(OWNER, ReplayBody(source="orders", window="2024-01-04"))
        older = client.plan(OWNER, ReplayBody(source="orders", window="2024-01-02"))

    assert retained.rewind_instead == f"rewind <group> {live_topic} to=2024-01-04T00:00"
    assert older.rewind_instead is None  # the topic's oldest record is from 2024-01-03


# --- the command line --------------------------------------------------------------------------------


def _run(argv: list[str], answer: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO(answer))
        code = main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, replay_daemon: DaemonProcess) -> None:
    monkeypatch.setenv("REPLAY_DAEMON_URL", replay_daemon.url)
    monkeypatch.setenv("REPLAY_API_TOKEN", replay_daemon.token)
    monkeypatch.setenv("REPLAY_USER", OWNER)


@pytest.mark.usefixtures("cli")
def test_the_cli_shows_lag_as_text_and_as_json(kafka_bootstrap: str, live_topic: str) -> None:
    group = behind_group(kafka_bootstrap, live_topic)

    code, out, err = _run(["lag", group, live_topic])
    assert code == EXIT_OK, err
    assert f"group {group} on {live_topic}: empty, 0 member(s), lag {10 + 5 + 0}" in out
    assert f"hottest: {live_topic}[0] lag 10" in out

    code, out, err = _run(["lag", group, "--json"])
    assert code == EXIT_OK, err
    answer = json.loads(out)
    assert [(p["partition"], p["committed"], p["end"], p["lag"]) for p in answer["partitions"]] == [
        (0, 30, 40, 10),
        (1, 35, 40, 5),
        (2, 40, 40, 0),
    ]
    assert answer["drain"]["state"] == "not_draining"  # a stopped consumer: nothing consumed, lag left


@pytest.mark.usefixtures("cli")
def test_the_cli_asks_before_rewinding_and_no_moves_nothing(kafka_bootstrap: str, live_topic: str) -> None:
    group = behind_group(kafka_bootstrap, live_topic)
    argv = ["rewind", group, live_topic, "to=2024-01-03T00:00:20"]

    code, out, err = _run(argv, answer="n\n")
    assert code == EXIT_FAILED
    assert "45 events are read again" in out and "not rewound: nothing moved" in out
    assert "Rewind? [y/N]" in err
    assert committed(kafka_bootstrap, group, live_topic) == {0: 30, 1: 35, 2: 40}

    code, out, err = _run([*argv, "--yes"])
    assert code == EXIT_OK, err
    assert "applied: the group's consumers start from the new offsets" in out
    assert committed(kafka_bootstrap, group, live_topic) == {0: 20, 1: 20, 2: 20}


@pytest.mark.usefixtures("cli")
def test_the_cli_refuses_a_group_with_members_without_asking(live_topic: str, member: str) -> None:
    code, out, err = _run(["rewind", member, live_topic, "to=earliest"])

    assert code == EXIT_FAILED
    assert "cannot be applied now" in out and "stop its consumers first" in err
    assert "Rewind?" not in err


def test_a_rewind_command_reaches_the_api_as_typed() -> None:
    command = parse("rewind svc orders to=2024-01-03T00:00:10")
    assert isinstance(command, RewindCommand)
    assert RewindBody.of(command, preview=False).command("svc") == command
