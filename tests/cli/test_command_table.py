"""The command table the Slack app and the CLI share: complete, rendered by both, retried by key."""

from __future__ import annotations

from typing import get_args

import pytest

from bot.listeners import commands as bot_commands
from daemon.cli import main as cli_main
from daemon.contract.commands import COMMANDS, RESULTS, Asker, execute
from daemon.contract.models import ReplayBody
from daemon.core.errors import BadRequest, Unavailable
from daemon.core.grammar import Command
from tests.fixtures.daemon import ADMIN, DaemonProcess
from tests.fixtures.lossy_proxy import lossy_proxy


def _names(types: object) -> list[str]:
    return sorted(t.__name__ for t in types)  # type: ignore[attr-defined]


def test_every_command_of_the_grammar_has_one_entry_in_the_table() -> None:
    assert _names(COMMANDS) == _names(get_args(Command))


@pytest.mark.parametrize("front_end", [bot_commands, cli_main], ids=["slack", "cli"])
def test_every_result_of_the_table_has_a_renderer_in_each_front_end(front_end: object) -> None:
    renderers = front_end.RENDERERS  # type: ignore[attr-defined]
    assert _names(renderers) == _names(RESULTS)


def test_a_command_without_an_entry_is_refused_before_any_call() -> None:
    class Unlisted:
        pass

    with pytest.raises(BadRequest, match="'Unlisted' has no entry in the command table"):
        execute(None, Unlisted(), Asker(actor="U1", key="k"))  # type: ignore[arg-type]


@pytest.mark.kafka
def test_a_create_whose_answer_was_lost_is_asked_again_with_its_key_and_makes_one_run(
    replay_daemon: DaemonProcess,
) -> None:
    body = ReplayBody(source="orders", window="2024-01-02..2024-01-03", tps=200)
    with lossy_proxy(replay_daemon.url) as proxy:
        proxy.lose[("POST", "/v1/replays")] = 1
        client = replay_daemon.client(base_url=proxy.url)
        run = client.create_replay(ADMIN, body, idempotency_key="lost-answer-1")

    creates = [seen for seen in proxy.seen if seen[:2] == ("POST", "/v1/replays")]
    assert len(creates) == 2  # the lost answer, then the same call with the same key
    assert run.created is False  # the daemon found the key's first run: the retry made nothing
    direct = replay_daemon.client()
    mine = [r.id for r in direct.list_replays(ADMIN, requester=ADMIN, limit=200).runs]
    assert mine.count(run.id) == 1
    direct.cancel_replay(ADMIN, run.id)


@pytest.mark.kafka
def test_a_call_without_a_key_is_never_asked_twice(replay_daemon: DaemonProcess) -> None:
    body = ReplayBody(source="orders", window="2024-01-02..2024-01-03", tps=200)
    with lossy_proxy(replay_daemon.url) as proxy:
        proxy.lose[("POST", "/v1/plans")] = 1
        with pytest.raises(Unavailable):
            replay_daemon.client(base_url=proxy.url).plan(ADMIN, body)

    assert [seen[:2] for seen in proxy.seen] == [("POST", "/v1/plans")]
