"""A local stand-in for Slack's Web API and `response_url`s: tests and `make demo` talk to it.

A real HTTP server (stdlib `ThreadingHTTPServer`, port 0 by default) that answers the methods this
app uses the way Slack does (`ok`, `ts`, `channel`, error codes), records every call in order, and
fails on demand: `fail_next(method, status=429)` (with `Retry-After: 1`) or `error="..."`; or by
input, as bolt-python's own mock server does: a channel or token ending in `429` always gets HTTP
429, a channel ending in `404` gets `channel_not_found`. `set_channel` makes a channel one the bot is
not in (`not_in_channel`; a private one is `channel_not_found`, as Slack hides it) or an archived one
(`is_archived`). `chat.update` edits a stored message in place. `files_upload_v2` works as slack_sdk
performs it: `files.getUploadURLExternal` hands out an upload URL served here, the bytes are POSTed
to it, and `files.completeUploadExternal` shares the file into a channel or thread; `file_bytes(id)`
gives the bytes back and `GET /_standin/files/<id>` serves them. `render_thread` prints a thread as a
person would read it; `GET /_standin/threads` serves the same text to another process (the demo).
This module is the HTTP server; what it remembers and how each method answers is
`scripts.devtools.standin_api`.

    python -m scripts.devtools.slack_standin --port 8790
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from scripts.devtools.standin_api import (
    RESPONSE_URL_METHOD,
    Call,
    ChannelSetup,
    State,
    StoredFile,
    WebApi,
    json_field,
)
from scripts.devtools.thread_text import Posted, render_thread


class SlackStandin:
    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._state = State()
        self._server = ThreadingHTTPServer((host, port), _handler_for(self._state, lambda: self.url))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> SlackStandin:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="slack-standin", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> SlackStandin:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """What `WebClient(base_url=...)` takes."""
        return f"{self.url}/api/"

    def response_url(self, key: str) -> str:
        return f"{self.url}/response/{key}"

    # -- failures and records ------------------------------------------------------------------

    def fail_next(self, method: str, times: int = 1, *, status: int = 200, error: str | None = None) -> None:
        """The next `times` calls to `method` get HTTP `status` (429 adds Retry-After) or `error`."""
        if status == 200 and error is None:
            raise ValueError("give a failing status or an error code")
        with self._state.lock:
            queue = self._state.failures.setdefault(method, deque())
            queue.extend([(status, error)] * times)

    def heal(self, method: str) -> int:
        """Drop the failures still queued for `method` (Slack is back); how many were left."""
        with self._state.lock:
            return len(self._state.failures.pop(method, ()))

    def set_channel(
        self, channel: str, *, member: bool = True, archived: bool = False, private: bool = False
    ) -> None:
        """Make `channel` one the bot is not in, or an archived one; posts there get Slack's error."""
        with self._state.lock:
            self._state.channels[channel] = ChannelSetup(member=member, archived=archived, private=private)

    def set_zone(self, user: str, tz: str | None) -> None:
        """`users.info` gives `user` this `tz` (an IANA name), or no zone at all when None."""
        with self._state.lock:
            self._state.zones[user] = tz

    def calls(self, method: str | None = None) -> list[Call]:
        return self._state.recorded(method)

    def files(self, channel: str | None = None) -> list[StoredFile]:
        """Uploaded files shared into a channel (any channel when None), in upload order."""
        with self._state.lock:
            shared = [f for f in self._state.files.values() if f.channel is not None and f.data is not None]
        return [f for f in shared if channel in (None, f.channel)]

    def file_bytes(self, file_id: str) -> bytes:
        """The bytes uploaded for `file_id` (KeyError when there are none)."""
        with self._state.lock:
            data = self._state.files[file_id].data
        if data is None:
            raise KeyError(file_id)
        return data

    def responses(self, key: str) -> list[dict[str, Any]]:
        """Bodies POSTed to `response_url(key)`, in order."""
        suffix = f"/response/{key}"
        return [c.params for c in self.calls(RESPONSE_URL_METHOD) if c.path == suffix]

    def messages(self, channel: str | None = None) -> list[Posted]:
        """Channel messages and thread replies as they stand now (edits applied), oldest first."""
        return self._state.posted(channel)

    def thread(self, channel: str, ts: str) -> list[Posted]:
        """The parent, then its replies in order."""
        return self._state.thread(channel, ts)

    def wait_until(self, condition: Callable[[], Any], *, timeout_s: float = 10.0, what: str = "it") -> Any:
        """Poll until `condition()` is truthy and return it; TimeoutError (with the calls) if not."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = condition()
            if result:
                return result
            if time.monotonic() > deadline:
                seen = [(c.method, c.status, c.error) for c in self.calls()]
                raise TimeoutError(f"waited {timeout_s}s for {what}; Slack calls so far: {seen}")
            time.sleep(0.05)

    def render_thread(self, channel: str, ts: str) -> str:
        return render_thread(self.thread(channel, ts))

    def render_all(self) -> str:
        """Every thread, oldest first: what the demo prints."""
        return self._state.render_all()


# --- the HTTP server -----------------------------------------------------------------------------------


def _handler_for(state: State, base_url: Callable[[], str]) -> type[BaseHTTPRequestHandler]:
    api = WebApi(state, base_url)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "slack-standin"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the recorded calls are the log."""

        def _reply(self, status: int, body: bytes, content_type: str, headers: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _params(self, query: str) -> dict[str, Any]:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8")
            params: dict[str, Any] = {k: v[0] for k, v in parse_qs(query).items()}
            if raw.startswith("{"):
                params.update(json.loads(raw))
            elif raw:
                params.update({k: json_field(v[0]) for k, v in parse_qs(raw).items()})
            return params

        def _planned_failure(self, method: str, params: dict[str, Any]) -> tuple[int, str | None]:
            token = self.headers.get("Authorization", "") or str(params.get("token", ""))
            channel = str(params.get("channel", ""))
            if channel.endswith("429") or token.endswith("429"):
                return 429, "ratelimited"
            if channel.endswith("404"):
                return 200, "channel_not_found"
            with state.lock:
                queue = state.failures.get(method)
                return queue.popleft() if queue else (200, None)

        def do_GET(self) -> None:
            url = urlparse(self.path)
            if url.path == "/_standin/threads":
                body = state.render_all().encode()
            elif url.path == "/_standin/calls":
                body = json.dumps([c.__dict__ for c in state.recorded()], default=str).encode()
            elif url.path.startswith("/_standin/files/"):
                with state.lock:
                    stored = state.files.get(url.path.removeprefix("/_standin/files/"))
                if stored is None or stored.data is None:
                    self._reply(404, b"not found", "text/plain", {})
                    return
                kind = "image/png" if stored.name.endswith(".png") else "application/octet-stream"
                self._reply(200, stored.data, kind, {})
                return
            else:
                self._reply(404, b"not found", "text/plain", {})
                return
            self._reply(200, body, "text/plain; charset=utf-8", {})

        def do_POST(self) -> None:
            url = urlparse(self.path)
            if url.path.startswith("/upload/v1/"):  # step 2 of files_upload_v2: raw bytes, no token
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, text = api.upload(url.path.removeprefix("/upload/v1/"), data)
                with state.lock:
                    state.calls.append(
                        Call("upload", {"length": len(data)}, time.time(), status, None, url.path)
                    )
                self._reply(status, text.encode(), "text/plain; charset=utf-8", {})
                return
            params = self._params(url.query)
            if url.path.startswith("/response/"):
                method = RESPONSE_URL_METHOD
            elif url.path.startswith("/api/"):
                method = url.path.removeprefix("/api/")
            else:
                self._reply(404, b"not found", "text/plain", {})
                return
            status, error = self._planned_failure(method, params)
            if method != RESPONSE_URL_METHOD and error is None and status == 200:
                auth = self.headers.get("Authorization", "")
                if method != "auth.test" and not auth.startswith("Bearer xox"):
                    error = "not_authed"
            if status == 200 and error is None:
                answer = {"ok": True} if method == RESPONSE_URL_METHOD else api.answer(method, params)
                error = None if answer.get("ok") else str(answer.get("error"))
            else:
                answer = {"ok": False, "error": error or "ratelimited"}
            with state.lock:
                state.calls.append(Call(method, params, time.time(), status, error, url.path))
            headers = {"Retry-After": "1"} if status == 429 else {}
            if method == RESPONSE_URL_METHOD and status == 200 and error is None:
                self._reply(200, b"ok", "text/html", headers)  # Slack answers response_url posts with "ok"
                return
            self._reply(status, json.dumps(answer).encode(), "application/json; charset=utf-8", headers)

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.devtools.slack_standin", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # before the ready line: callers may stop us at once
    standin = SlackStandin(host=args.host, port=args.port).start()
    print(f"slack-standin: web api {standin.base_url} · threads {standin.url}/_standin/threads", flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        standin.stop()


if __name__ == "__main__":
    main()
