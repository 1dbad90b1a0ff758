"""A local stand-in for Slack's Web API and `response_url`s: tests and `make demo` talk to it.

A real HTTP server (stdlib `ThreadingHTTPServer`, port 0 by default) that answers the methods this
app uses the way Slack does (`ok`, `ts`, `channel`, error codes), records every call in order, and
fails on demand: `fail_next(method, status=429)` (with `Retry-After: 1`) or `error="..."`; or by
input, as bolt-python's own mock server does: a channel or token ending in `429` always gets HTTP
429, a channel ending in `404` gets `channel_not_found`. `render_thread` prints a thread as a person
would read it; `GET /_standin/threads` serves the same text to another process (the demo).

    python -m scripts.devtools.slack_standin --port 8790
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from scripts.devtools.thread_text import Posted, render_thread

BOT_USER, BOT_ID, TEAM_ID = "U0REPLAYBOT", "B0REPLAYBOT", "T0STANDIN"
RESPONSE_URL_METHOD = "response_url"


@dataclass(frozen=True)
class Call:
    """One request as received: Web API method (or `response_url`), its parameters, and our answer."""

    method: str
    params: dict[str, Any]
    at: float
    status: int
    error: str | None = None
    path: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None


@dataclass
class _State:
    calls: list[Call] = field(default_factory=list)
    messages: dict[tuple[str, str], Posted] = field(default_factory=dict)
    ephemerals: list[dict[str, Any]] = field(default_factory=list)
    failures: dict[str, deque[tuple[int, str | None]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    sequence: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def recorded(self, method: str | None = None) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if method is None or c.method == method]

    def posted(self, channel: str | None = None) -> list[Posted]:
        with self.lock:
            found = [m for m in self.messages.values() if channel in (None, m.channel)]
        return sorted(found, key=lambda m: float(m.ts))

    def thread(self, channel: str, ts: str) -> list[Posted]:
        return [m for m in self.posted(channel) if m.ts == ts or m.thread_ts == ts]

    def render_all(self) -> str:
        parents = [m for m in self.posted() if m.thread_ts is None]
        return "\n\n".join(render_thread(self.thread(m.channel, m.ts)) for m in parents)


class SlackStandin:
    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._state = _State()
        self._server = ThreadingHTTPServer((host, port), _handler_for(self._state))
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

    def calls(self, method: str | None = None) -> list[Call]:
        return self._state.recorded(method)

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


# --- the Web API --------------------------------------------------------------------------------------


def _json_field(value: Any) -> Any:
    """Form-encoded calls send `blocks` as a JSON string; JSON calls send it as a list."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


class _Api:
    """The methods: each takes params and returns Slack's JSON answer (ok or an error code)."""

    def __init__(self, state: _State) -> None:
        self._state = state

    def _ts(self) -> str:
        return f"{int(time.time())}.{next(self._state.sequence):06d}"

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, "m_" + method.replace(".", "_"), None)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        answer: dict[str, Any] = handler(params)
        return answer

    def m_auth_test(self, _: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://standin.slack.com/",
            "team": "Stand-in",
            "user": "replay-bot",
            "team_id": TEAM_ID,
            "user_id": BOT_USER,
            "bot_id": BOT_ID,
        }

    def m_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        channel = params.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not params.get("text") and not params.get("blocks"):
            return {"ok": False, "error": "no_text"}
        posted = Posted(
            channel=channel,
            ts=self._ts(),
            text=params.get("text") or "",
            blocks=_json_field(params.get("blocks")) or [],
            thread_ts=params.get("thread_ts") or None,
        )
        with self._state.lock:
            self._state.messages[(channel, posted.ts)] = posted
        message = {
            "type": "message",
            "user": BOT_USER,
            "bot_id": BOT_ID,
            "text": posted.text,
            "ts": posted.ts,
        }
        if posted.thread_ts:
            message["thread_ts"] = posted.thread_ts
        return {"ok": True, "channel": channel, "ts": posted.ts, "message": message}

    def m_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        key = (params.get("channel", ""), params.get("ts", ""))
        with self._state.lock:
            posted = self._state.messages.get(key)
            if posted is None:
                return {"ok": False, "error": "message_not_found"}
            posted.text = params.get("text") or posted.text
            posted.blocks = _json_field(params.get("blocks")) or posted.blocks
            posted.edits += 1
        return {"ok": True, "channel": posted.channel, "ts": posted.ts, "text": posted.text}

    def m_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        if not params.get("channel"):
            return {"ok": False, "error": "channel_not_found"}
        if not params.get("user"):
            return {"ok": False, "error": "user_not_in_channel"}
        with self._state.lock:
            self._state.ephemerals.append(dict(params))
        return {"ok": True, "message_ts": self._ts()}

    def m_conversations_open(self, params: dict[str, Any]) -> dict[str, Any]:
        users = params.get("users")
        if not users:
            return {"ok": False, "error": "users_list_not_supplied"}
        first = str(users).split(",")[0].strip()
        return {"ok": True, "channel": {"id": "D" + first.lstrip("UW")[:10]}}

    def m_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = params.get("user")
        if not user:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": {"id": user, "name": user.lower(), "real_name": user, "tz": "UTC"}}


def _handler_for(state: _State) -> type[BaseHTTPRequestHandler]:
    api = _Api(state)

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
                params.update({k: _json_field(v[0]) for k, v in parse_qs(raw).items()})
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
            else:
                self._reply(404, b"not found", "text/plain", {})
                return
            self._reply(200, body, "text/plain; charset=utf-8", {})

        def do_POST(self) -> None:
            url = urlparse(self.path)
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
