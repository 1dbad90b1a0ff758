"""`replay login` / `replay logout`: a personal token kept on disk for the CLI, readable by its user only.

An admin makes the token (`replayd token U…`) and hands it over; `replay login` asks for it without
echoing it, checks it with the daemon (`GET /v1/whoami`: whose token is it?) and only then writes it,
with that user id and the daemon's URL, to a file of mode 0600. The service token is refused here: it
belongs to the bot and may act as anyone, so it must not end up in a person's home directory.

A token goes only where it may (``check_destination``): never over plain http to a host other than
this machine unless ``REPLAY_ALLOW_PLAIN_HTTP`` says so, and a stored token only to the URL it was
stored for, so pointing ``REPLAY_DAEMON_URL`` elsewhere cannot send it to a stranger.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from daemon.contract.client import DaemonClient
from daemon.core.errors import BadRequest, ConfigError


@dataclass(frozen=True)
class StoredLogin:
    daemon_url: str
    user: str
    token: str


def credentials_path(environ: Mapping[str, str]) -> Path:
    """`REPLAY_CREDENTIALS`, else `$XDG_CONFIG_HOME/replay/credentials.json` (~/.config by default)."""
    if explicit := environ.get("REPLAY_CREDENTIALS"):
        return Path(explicit)
    config_home = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "replay" / "credentials.json"


def load_login(path: Path) -> StoredLogin | None:
    """The stored login, or None when there is none; a damaged file is a `ConfigError` naming it."""
    try:
        document = json.loads(path.read_text())
        return StoredLogin(str(document["daemon_url"]), str(document["user"]), str(document["token"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"{path} is not a login this CLI wrote ({exc}); `replay logout` removes it"
        ) from exc


def _write_private(path: Path, text: str) -> None:
    """Created 0600 from the first byte (no window where another user could read the token)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    path.chmod(0o600)  # an existing file keeps its old mode through O_CREAT: set it again


def _on_this_machine(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_destination(url: str, *, allow_plain_http: bool = False, stored: StoredLogin | None = None) -> None:
    """Refuse to send a token to ``url`` where it could be read or where it was not issued for."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"the daemon URL '{url}' is not an http(s) URL with a host")
    if parts.scheme == "http" and not _on_this_machine(parts.hostname) and not allow_plain_http:
        raise ConfigError(
            f"refusing to send a token over plain http to {parts.hostname}: use https, or set "
            "REPLAY_ALLOW_PLAIN_HTTP=true on a network you trust"
        )
    if stored is not None and url.rstrip("/") != stored.daemon_url.rstrip("/"):
        raise ConfigError(
            f"the stored token was issued for {stored.daemon_url}, not {url}: "
            f"`replay login {url}` with a token for that daemon"
        )


def login(
    daemon_url: str, path: Path, read_token: Callable[[], str], *, allow_plain_http: bool = False
) -> StoredLogin:
    """Ask for the token, learn whose it is from the daemon, store it; nothing is written on failure."""
    check_destination(daemon_url, allow_plain_http=allow_plain_http)
    token = read_token().strip()
    if not token:
        raise BadRequest("no token given: ask an admin for one (`replayd token <your Slack id>`)")
    with DaemonClient(base_url=daemon_url, token=token) as client:
        who = client.whoami()
    if who.credential != "personal":
        raise BadRequest("that is the service token (the bot's): log in with your personal token instead")
    stored = StoredLogin(daemon_url=daemon_url, user=who.user, token=token)
    _write_private(path, json.dumps(stored.__dict__, indent=2) + "\n")
    return stored


def logout(path: Path) -> bool:
    """Forget the stored token; False when there was none."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
