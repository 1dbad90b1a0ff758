"""`replay-bot`: serve the Slack app over HTTP (uvicorn) or, with an app token, over Socket Mode.

Bolt's own `app.start()` is a single-threaded development server, and its Starlette adapter calls
the synchronous `App.dispatch` on the event loop: either way one slow request delays every ack
behind it. Here each request is dispatched in Starlette's thread pool under uvicorn, so acks are
concurrent. Commands and button clicks share one path, `/slack/events`.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from dataclasses import dataclass

import structlog
import uvicorn
from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from bot.app import create_app
from daemon.config.logs import configure_logging
from daemon.config.settings import load_settings
from daemon.contract.client import DaemonClient
from daemon.core.errors import ConfigError

log = structlog.get_logger(__name__)

EVENTS_PATH = "/slack/events"
DAEMON_TIMEOUT_S = 30.0
START_TIMEOUT_S = 10.0


def build_asgi(app: App, *, path: str = EVENTS_PATH) -> Starlette:
    """The Bolt app as an ASGI app; `dispatch` runs in a worker thread, never on the event loop."""

    async def events(request: Request) -> Response:
        bolt_request = to_bolt_request(request, await request.body())
        return to_starlette_response(await run_in_threadpool(app.dispatch, bolt_request))

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route(path, events, methods=["POST"]), Route("/healthz", healthz)])


@dataclass
class ServerThread:
    """An ASGI app served by uvicorn in a background thread (tests, the benchmark, the demo)."""

    server: uvicorn.Server
    thread: threading.Thread
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def start_in_thread(asgi: Starlette, *, host: str = "127.0.0.1", port: int = 0) -> ServerThread:
    """Bind first (port 0 picks a free one), then serve; returns once uvicorn is accepting."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    config = uvicorn.Config(asgi, log_config=None, access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on {host}:{port}")
        time.sleep(0.01)
    return ServerThread(server=server, thread=thread, host=host, port=sock.getsockname()[1])


def main() -> None:
    try:
        settings = load_settings()
        settings.require("slack_bot_token", "api_token")
        configure_logging(
            log_format=settings.log_format, level=settings.log_level, secrets=settings.secret_values()
        )
        assert settings.api_token is not None
        daemon = DaemonClient(
            base_url=settings.daemon_url,
            token=settings.api_token.get_secret_value(),
            timeout_s=DAEMON_TIMEOUT_S,
        )
        app = create_app(settings, daemon)
    except ConfigError as exc:
        print(f"replay-bot: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if settings.slack_app_token is not None:
        log.info("replay-bot connecting over Socket Mode")
        handler = SocketModeHandler(app, settings.slack_app_token.get_secret_value())
        handler.start()  # type: ignore[no-untyped-call]  # slack_bolt leaves SocketModeHandler.start unannotated
        return
    log.info("replay-bot listening", host=settings.bot_host, port=settings.bot_port, path=EVENTS_PATH)
    uvicorn.run(build_asgi(app), host=settings.bot_host, port=settings.bot_port, log_config=None)


if __name__ == "__main__":
    main()
