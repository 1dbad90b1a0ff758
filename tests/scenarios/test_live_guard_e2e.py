"""No double replays into a live topic, over real HTTP against the real daemon (SQLite, local Spark).

A second live replay of an overlapping window is a 409 naming the first run, its requester and state;
`force=yes` overrides it; an auto-provisioned topic is never refused; two requests at once create one run.
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
from typing import Any

import httpx
import pytest

from daemon.cli.main import EXIT_FAILED, EXIT_OK, main
from daemon.contract.client import DaemonClient
from daemon.contract.models import ReplayBody
from daemon.core.errors import Conflict
from tests.fixtures.daemon import ADMIN, OWNER, DaemonProcess

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _live(window: str, **fields: Any) -> ReplayBody:
    return ReplayBody(source="orders", window=window, tps=5000, topic="live", confirm_live=True, **fields)


def _cancel_all(client: DaemonClient, run_ids: list[str]) -> None:
    """Spare the busy machine the Spark jobs these tests do not need to finish."""
    for run_id in run_ids:
        if client.get_replay(OWNER, run_id).state not in ("succeeded", "failed", "cancelled"):
            with contextlib.suppress(Conflict):  # it ended meanwhile
                client.cancel_replay(OWNER, run_id)


def test_an_overlapping_live_replay_is_refused_naming_the_run_unless_forced(
    replay_daemon: DaemonProcess,
) -> None:
    with replay_daemon.client() as client:
        first = client.create_replay(OWNER, _live("2024-01-02..2024-01-03"))
        before = [run.id for run in client.list_replays(OWNER, limit=200).runs]

        with pytest.raises(Conflict) as refused:
            client.create_replay(ADMIN, _live("2024-01-03"))
        plan = client.plan(ADMIN, _live("2024-01-03"))
        forced = client.create_replay(ADMIN, _live("2024-01-03", force=True))
        auto = client.create_replay(ADMIN, ReplayBody(source="orders", window="2024-01-03", tps=5000))
        after = [run.id for run in client.list_replays(OWNER, limit=200).runs]
        _cancel_all(client, [first.id, forced.id, auto.id])

    message = str(refused.value)
    assert first.id in message and OWNER in message and "force=yes" in message
    assert any(state in message for state in ("queued", "submitted", "running", "succeeded"))
    assert [o.run_id for o in plan.overlapping] == [first.id]
    assert (forced.created, forced.topic) == (True, first.topic)
    assert auto.created and auto.topic.startswith("replay.orders.")
    assert set(after) - set(before) == {forced.id, auto.id}


def test_live_replays_whose_filters_share_no_row_run_together(replay_daemon: DaemonProcess) -> None:
    """Each pins the key to its own orders; a third asking for one of them is refused."""
    with replay_daemon.client() as client:
        first = client.create_replay(
            OWNER, _live("2024-01-05", where="order_id IN ('ord-00387', 'ord-00394')")
        )
        beside = client.create_replay(ADMIN, _live("2024-01-05", where="order_id = 'ord-00396'"))
        plan = client.plan(ADMIN, _live("2024-01-05", where="order_id = 'ord-00394' and amount > 1"))
        with pytest.raises(Conflict) as refused:
            client.create_replay(ADMIN, _live("2024-01-05", where="order_id = 'ord-00394' and amount > 1"))
        _cancel_all(client, [first.id, beside.id])

    assert beside.created and beside.topic == first.topic
    assert [o.run_id for o in plan.overlapping] == [first.id]
    assert first.id in str(refused.value)


def test_two_live_replays_of_one_window_at_once_create_exactly_one_run(replay_daemon: DaemonProcess) -> None:
    answers: list[httpx.Response] = []
    lock = threading.Lock()
    barrier = threading.Barrier(2)

    def request(actor: str) -> None:
        barrier.wait(timeout=10)
        response = httpx.post(
            f"{replay_daemon.url}/v1/replays",
            json=_live("2024-01-06").model_dump(),
            headers={"Authorization": f"Bearer {replay_daemon.token}", "X-Replay-Actor": actor},
            timeout=60,
        )
        with lock:
            answers.append(response)

    threads = [threading.Thread(target=request, args=(actor,)) for actor in (OWNER, ADMIN)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(r.status_code for r in answers) == [201, 409], [r.text for r in answers]
    [won] = [r.json() for r in answers if r.status_code == 201]
    [lost] = [r.json()["error"] for r in answers if r.status_code == 409]
    assert won["id"] in lost and won["requester"] in lost
    with replay_daemon.client() as client:
        _cancel_all(client, [won["id"]])


def test_the_command_line_is_refused_the_same_way_and_force_yes_goes_through(
    replay_daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLAY_DAEMON_URL", replay_daemon.url)
    monkeypatch.setenv("REPLAY_API_TOKEN", replay_daemon.token)
    monkeypatch.setenv("REPLAY_USER", OWNER)

    def run(*words: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(["--json", "--confirm-live", *words], out=out, err=err)
        return code, out.getvalue() + err.getvalue()

    first_code, first = run("orders", "2024-01-04", "topic=live")
    refused_code, refused = run("orders", "2024-01-04", "topic=live")
    forced_code, forced = run("orders", "2024-01-04", "topic=live", "force=yes")

    first_id = json.loads(first.splitlines()[0])["id"]
    forced_id = json.loads(forced.splitlines()[0])["id"]
    assert (first_code, refused_code, forced_code) == (EXIT_OK, EXIT_FAILED, EXIT_OK), refused
    assert first_id in refused and "force=yes" in refused
    assert forced_id != first_id
    with replay_daemon.client() as client:
        _cancel_all(client, [first_id, forced_id])
