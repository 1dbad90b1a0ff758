"""The API's front door: who is asking, then how much they send, before any body is read.

Tokens (``ApiKeys``): the service token of a front end that authenticated its user itself (the bot),
and personal tokens that act as their owner only.

A pure ASGI middleware, so it runs before FastAPI parses anything: a `/v1` request without the right
bearer token is answered 401 without reading its body, and a body over `max_body_bytes` is answered
413 (by its Content-Length at once, or as soon as a chunked body passes the cap). Every request the
service takes is a few hundred bytes of JSON; the cap is far above that and far below what could hurt.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 64 * 1024


SERVICE = ""  # the caller of a service token: it names the person it acts for itself


@dataclass(frozen=True)
class ApiKeys:
    """Which bearer tokens the API takes, and whom each one speaks for.

    The *service* token belongs to a front end that authenticated the person itself (the Slack bot,
    which checked Slack's request signature): it names the acting user in ``X-Replay-Actor``. A
    *personal* token (the CLI's) belongs to one user and acts as that user only, so a token lent or
    leaked is that one person's, never everyone's. Personal tokens are configured by their SHA-256
    (``REPLAY_USER_TOKENS``), so the service's settings hold no usable secret of a person.
    """

    service: bytes
    personal: Mapping[str, str] = field(default_factory=dict)  # sha256 hex of a token -> its user

    def caller(self, authorization: str | None) -> str | None:
        """``SERVICE`` for the service token, the user id for a personal one, None for anything else."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        if hmac.compare_digest(token.encode(), self.service):
            return SERVICE
        return self.personal.get(token_digest(token))  # a lookup by a hash of the secret, not the secret


def token_digest(token: str) -> str:
    """How a personal token is written in the settings: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_personal_token(user: str) -> tuple[str, str]:
    """A fresh token for ``user`` and the ``REPLAY_USER_TOKENS`` entry that admits it."""
    token = "rpl_" + secrets.token_urlsafe(32)
    return token, f"{user}:{token_digest(token)}"


class _TooLarge(Exception):
    pass


class FrontDoor:
    def __init__(self, app: ASGIApp, *, keys: ApiKeys, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self._app = app
        self._keys = keys
        self._max = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/v1/"):
            await self._app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        if self._keys.caller(headers.get("authorization")) is None:
            await _answer(send, 401, "missing or invalid bearer token", {"www-authenticate": "Bearer"})
            return
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self._max:
            await _answer(send, 413, self._too_large())
            return
        try:
            body = await self._read(receive)
        except _TooLarge:
            await _answer(send, 413, self._too_large())
            return
        await self._app(scope, _replay(body), send)

    def _too_large(self) -> str:
        return f"request body over {self._max:,} bytes: every request of this API is a small JSON document"

    async def _read(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max:
                raise _TooLarge()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    """A `receive` that hands the already-read body to the app once, then waits like the real one."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


async def _answer(send: Send, status: int, message: str, extra: dict[str, str] | None = None) -> None:
    payload = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    headers += [(key.encode(), value.encode()) for key, value in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
