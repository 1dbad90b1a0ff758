"""`replay login` / `replay logout` against a real daemon: a personal token stored 0600, checked first.

The token is typed at a hidden prompt (getpass); the test types it by answering that prompt.
"""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest

from daemon.cli.main import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, main
from tests.fixtures.daemon import API_TOKEN, OWNER, OWNER_TOKEN, STRANGER, DaemonProcess

pytestmark = [pytest.mark.kafka]


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, replay_daemon: DaemonProcess) -> Path:
    """No token and no user in the environment: only what `replay login` stores."""
    for name in ("REPLAY_API_TOKEN", "REPLAY_USER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REPLAY_DAEMON_URL", replay_daemon.url)
    path = tmp_path / "config" / "replay" / "credentials.json"
    monkeypatch.setenv("REPLAY_CREDENTIALS", str(path))
    return path


def _type_at_prompt(monkeypatch: pytest.MonkeyPatch, token: str) -> None:
    monkeypatch.setattr("daemon.cli.main.getpass.getpass", lambda prompt: token)


def test_login_stores_a_personal_token_for_its_owner_only_and_the_cli_then_acts_as_that_owner(
    credentials: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = _run(["list"])
    assert code == EXIT_BAD_INPUT and "replay login" in err  # not logged in: says how

    _type_at_prompt(monkeypatch, OWNER_TOKEN)
    code, out, err = _run(["login"])

    assert code == EXIT_OK, err
    assert f"logged in as {OWNER}" in out
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert json.loads(credentials.read_text())["user"] == OWNER
    code, out, err = _run(["list", "--json"])
    assert code == EXIT_OK, err
    code, _, err = _run(["list", "--as", STRANGER])
    assert code == EXIT_FAILED and "acts as its owner only" in err  # the token cannot be lent

    code, out, _ = _run(["logout"])
    assert code == EXIT_OK and not credentials.exists()
    assert _run(["logout"])[1].strip() == "not logged in"


@pytest.mark.parametrize(
    ("token", "code", "says"),
    [
        ("rpl_not-a-token-anyone-was-given", EXIT_FAILED, "refused our credentials"),
        (API_TOKEN, EXIT_BAD_INPUT, "service token"),
        ("", EXIT_BAD_INPUT, "no token given"),
    ],
)
def test_a_token_the_daemon_does_not_know_or_the_service_token_is_never_stored(
    credentials: Path, monkeypatch: pytest.MonkeyPatch, token: str, code: int, says: str
) -> None:
    _type_at_prompt(monkeypatch, token)

    got, _, err = _run(["login"])

    assert (got, says in err) == (code, True), err
    assert not credentials.exists()
