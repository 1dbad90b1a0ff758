"""Who may read the pages: signed, expiring links, and the session cookie a link sets.

A person asks Slack (`/replay open`) or the CLI (`replay open r-…`) for a link; the API signs
``(user, path)`` with a key only the daemon holds and answers ``<pages url>/login?token=…``. Opening it
within ``link_s`` sets a session cookie (the user, signed and timed the same way) good for
``session_s`` and redirects to the path. Nothing is stored: a link or a cookie is checked by its
signature and its age alone, so a daemon restart keeps everyone signed in, and a new key (a new
service token) signs everyone out (docs/decisions/0059).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

from daemon.core.ids import RUN_ID_PATTERN

# what a link may lead to: the console, or one run's page (never another site: no open redirect)
PAGE_PATH = re.compile(rf"^/(?:runs/{RUN_ID_PATTERN.pattern})?$")
SESSION_COOKIE = "replay_session"


class LinkRefused(Exception):
    """A link that cannot sign anyone in; the message says why and what to do instead."""


@dataclass(frozen=True)
class Opened:
    user: str
    path: str


def page_secret(service_token: str) -> bytes:
    """The signing key: derived from the service token, so it is as secret as that and rotates with it."""
    return hashlib.sha256(b"replay-pages\x00" + service_token.encode()).digest()


class PageKeys:
    def __init__(self, secret: bytes, *, link_s: float, session_s: float) -> None:
        self._links = URLSafeTimedSerializer(secret, salt="replay-page-link")
        self._sessions = URLSafeTimedSerializer(secret, salt="replay-page-session")
        self.link_s = link_s
        self.session_s = session_s

    def link_token(self, user: str, path: str = "/") -> str:
        """The token of a login link for `user` to `path` (the console, or a run's page)."""
        if not PAGE_PATH.match(path):
            raise ValueError(f"'{path}' is not a page of this service (/ or /runs/<run id>)")
        return self._links.dumps({"u": user, "p": path})

    def open_link(self, token: str) -> Opened:
        """Whom the link signs in and where it leads; LinkRefused when it is too old or not ours."""
        try:
            found = self._links.loads(token, max_age=int(self.link_s))
        except SignatureExpired:
            raise LinkRefused(
                f"this link has expired (links open within {self.link_s / 60:g} minutes): ask for a new "
                "one with /replay open in Slack or `replay open` in the CLI"
            ) from None
        except BadSignature:
            raise LinkRefused(
                "this is not a link this service made (or it was cut short): ask for a new one with "
                "/replay open in Slack or `replay open` in the CLI"
            ) from None
        user, path = found.get("u"), found.get("p")
        if not isinstance(user, str) or not isinstance(path, str) or not PAGE_PATH.match(path):
            raise LinkRefused("this link names no page of this service: ask for a new one")
        return Opened(user=user, path=path)

    def session(self, user: str) -> str:
        """The session cookie's value for `user`."""
        return self._sessions.dumps(user)

    def session_user(self, cookie: str | None) -> str | None:
        """The signed-in user, or None with no cookie, a forged one or an expired one."""
        if not cookie:
            return None
        try:
            user = self._sessions.loads(cookie, max_age=int(self.session_s))
        except BadSignature:  # SignatureExpired is one
            return None
        return user if isinstance(user, str) else None
