"""`replay login` / `replay logout` against a real daemon: a personal token stored 0600, checked first.

The token is typed at a hidden prompt (getpass); the test types it by answering that prompt.
"""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest

from daemon.cli.login import check_destination
from daemon.cli.main import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, main
from daemon.core.errors import ConfigError
from tests.fixtures.daemon import API_TOKEN, NO_JOBS, OWNER, OWNER_TOKEN, STRANGER, DaemonProcess

pytestmark = [pytest.mark.kafka, NO_JOBS]


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


# --- where a token may go (no daemon is reached: each refusal comes before any request)


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.1:8080", True),
        ("http://localhost:8080", True),
        ("http://[::1]:8080", True),
        ("https://replay.example.com", True),
        ("http://replay.example.com", False),
        ("http://10.0.0.7:8080", False),
        ("ftp://replay.example.com", False),
        ("replay.example.com", False),
    ],
)
def test_a_token_goes_over_plain_http_only_to_this_machine(url: str, allowed: bool) -> None:
    if allowed:
        check_destination(url)
    else:
        with pytest.raises(ConfigError):
            check_destination(url)
    check_destination("http://10.0.0.7:8080", allow_plain_http=True)  # when told, on a trusted network


def test_the_cli_refuses_plain_http_to_another_host_before_sending_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REPLAY_DAEMON_URL", "http://192.0.2.10:8080")  # TEST-NET: nothing answers there
    monkeypatch.setenv("REPLAY_API_TOKEN", OWNER_TOKEN)
    monkeypatch.setenv("REPLAY_USER", OWNER)
    monkeypatch.delenv("REPLAY_ALLOW_PLAIN_HTTP", raising=False)
    monkeypatch.setenv("REPLAY_CREDENTIALS", str(tmp_path / "credentials.json"))
    _type_at_prompt(monkeypatch, OWNER_TOKEN)

    listed, _, list_err = _run(["list"])
    logged, _, login_err = _run(["login"])

    assert (listed, logged) == (EXIT_BAD_INPUT, EXIT_BAD_INPUT)
    assert "refusing to send a token over plain http to 192.0.2.10" in list_err
    assert "REPLAY_ALLOW_PLAIN_HTTP" in login_err
    assert not (tmp_path / "credentials.json").exists()


def test_a_stored_token_goes_only_to_the_daemon_it_was_stored_for(
    credentials: Path, monkeypatch: pytest.MonkeyPatch, replay_daemon: DaemonProcess
) -> None:
    _type_at_prompt(monkeypatch, OWNER_TOKEN)
    assert _run(["login"])[0] == EXIT_OK
    elsewhere = "http://127.0.0.1:9"  # this machine, another daemon: not the one the token is for
    monkeypatch.setenv("REPLAY_DAEMON_URL", elsewhere)

    code, _, err = _run(["list"])

    assert code == EXIT_BAD_INPUT
    assert f"issued for {replay_daemon.url}, not {elsewhere}" in err
    monkeypatch.setenv("REPLAY_DAEMON_URL", replay_daemon.url)
    assert _run(["list"])[0] == EXIT_OK
