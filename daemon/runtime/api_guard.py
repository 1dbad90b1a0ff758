"""The API's front door: who is asking, then how much they send, before any body is read.

A pure ASGI middleware, so it runs before FastAPI parses anything: a `/v1` request without the right
bearer token is answered 401 without reading its body, and a body over `max_body_bytes` is answered
413 (by its Content-Length at once, or as soon as a chunked body passes the cap). Every request the
service takes is a few hundred bytes of JSON; the cap is far above that and far below what could hurt.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 64 * 1024


def bearer_ok(authorization: str | None, expected: bytes) -> bool:
    """`Authorization: Bearer <token>` matches, compared in constant time."""
    scheme, _, token = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.encode(), expected)


class _TooLarge(Exception):
    pass


class FrontDoor:
    def __init__(self, app: ASGIApp, *, api_token: bytes, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self._app = app
        self._token = api_token
        self._max = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith("/v1/"):
            await self._app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        if not bearer_ok(headers.get("authorization"), self._token):
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
