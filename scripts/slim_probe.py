"""Run inside a slim venv by `scripts/check-slim-installs`: is this install really slim, and does it work?

`python -I slim_probe.py bot|cli` checks that no heavy distribution is installed, imports the
process's entry modules from the installed wheel (never the source tree) and, for the bot, answers a
Slack-signed `/replay help` through the real Bolt app. Standard library only until the project's
modules are imported. On a missing module it names the project module that imported it and the
import chain that led there, because that module, not the extras, is what has to change.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import importlib.metadata
import importlib.util
import json
import re
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import ClassVar
from urllib.parse import urlencode

# What neither the bot nor the CLI may have installed: Spark, Arrow, AWS, the database, Kafka.
HEAVY = ("pyspark", "pyarrow", "boto3", "botocore", "sqlalchemy", "alembic", "confluent_kafka")
PROJECT = ("bot", "daemon", "spark_job", "store")
ENTRY_MODULES = {"bot": ("bot.server", "bot.app"), "cli": ("daemon.cli.main",)}
USAGE_LINE = "/replay status [run-id]"


class ProbeFailure(Exception):
    """A check failed; the message says what and where."""


def _requirers(distribution: str) -> list[str]:
    """Installed distributions that declare a requirement on `distribution`, as `name[extra]` when
    only one of their extras asks for it (so `kafka-replay[daemon]` points at the extra to fix)."""
    wanted = distribution.lower().replace("_", "-")
    found = []
    for dist in importlib.metadata.distributions():
        owner = dist.metadata["Name"]
        for requirement in dist.requires or []:
            name = re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].lower().replace("_", "-")
            if name != wanted or owner.lower().replace("_", "-") == wanted:
                continue
            extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", requirement)
            found.append(f"{owner}[{extra.group(1)}]" if extra else owner)
    return sorted(set(found))


def check_not_installed(extra: str) -> None:
    present = [name for name in HEAVY if importlib.util.find_spec(name) is not None]
    if present:
        lines = [
            f"  {name} (required by: {', '.join(_requirers(name)) or 'nothing: installed directly'})"
            for name in present
        ]
        raise ProbeFailure(f"the [{extra}] install has heavy packages it must not have:\n" + "\n".join(lines))


def _import_chain(tb: TracebackType | None) -> list[str]:
    """The modules being executed when the import failed, outermost first."""
    chain: list[str] = []
    while tb is not None:
        frame = tb.tb_frame
        name = frame.f_globals.get("__name__", "")
        if frame.f_code.co_name == "<module>" and name.split(".")[0] in PROJECT and name not in chain:
            chain.append(name)
        tb = tb.tb_next
    return chain


def import_entry(extra: str, module: str) -> None:
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or "?"
        chain = _import_chain(exc.__traceback__)
        culprit = chain[-1] if chain else module
        top = missing.split(".")[0]
        if top in PROJECT:
            what = f"{missing!r}, which is not in the built wheel"
        else:
            missing = top
            kind = "a heavy dependency" if top in HEAVY else "a package"
            what = f"{top!r}, {kind} the [{extra}] install does not have"
        raise ProbeFailure(
            f"importing {module} needs {what}.\n"
            f"  imported by: {culprit}\n"
            f"  import chain: {' -> '.join([*chain, missing])}"
        ) from exc
    where = Path(loaded.__file__ or "").resolve()
    if Path(sys.prefix).resolve() not in where.parents:
        raise ProbeFailure(
            f"{module} was imported from {where}, not from the installed wheel in {sys.prefix}"
        )


def _project_modules() -> list[str]:
    return sorted(name for name in sys.modules if name.split(".")[0] in PROJECT)


class _SlackApi(BaseHTTPRequestHandler):
    """The one Web API call a help command makes: Bolt's `auth.test` on the first request."""

    calls: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        method = self.path.rstrip("/").rsplit("/", 1)[-1]
        self.calls.append(method)
        answer = {"ok": True, "team_id": "T0SLIM", "user_id": "U0BOT", "bot_id": "B0BOT"}
        payload = json.dumps(answer if method == "auth.test" else {"ok": False, "error": "unexpected"})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(payload.encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def slack_api() -> Iterator[str]:
    """A local Slack Web API on a free port; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlackApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/"
    finally:
        server.shutdown()
        server.server_close()


def answer_help_over_slack() -> str:
    """Build the app from REPLAY_* settings, as `replay-bot` does, and dispatch a signed `/replay help`."""
    with slack_api() as api_url:
        body = _dispatch_help(api_url)
    unexpected = [call for call in _SlackApi.calls if call != "auth.test"]
    if unexpected:
        raise ProbeFailure(f"/replay help called the Slack Web API beyond auth.test: {unexpected}")
    return body


def _dispatch_help(api_url: str) -> str:
    from slack_bolt.request import BoltRequest

    from bot.app import create_app
    from daemon.config.settings import load_settings
    from daemon.contract.client import DaemonClient

    settings = load_settings(slack_api_url=api_url)
    if settings.api_token is None or settings.slack_signing_secret is None:
        raise ProbeFailure("REPLAY_API_TOKEN and REPLAY_SLACK_SIGNING_SECRET must be set")
    secret = settings.slack_signing_secret.get_secret_value()
    daemon = DaemonClient(base_url=settings.daemon_url, token=settings.api_token.get_secret_value())
    app = create_app(settings, daemon)
    body = urlencode(
        {
            "team_id": "T0SLIM",
            "channel_id": "C0SLIM",
            "user_id": "U0SLIM",
            "command": "/replay",
            "text": "help",
            "api_app_id": "A0REPLAY",
            "response_url": "http://127.0.0.1:9/unused",
            "trigger_id": "1.2.slim",
        }
    )
    stamp = str(int(time.time()))
    digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
    headers: dict[str, str | Sequence[str]] = {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": f"v0={digest}",
    }
    response = app.dispatch(BoltRequest(body=body, headers=headers))
    if response.status != 200 or USAGE_LINE not in response.body:
        raise ProbeFailure(
            f"/replay help answered {response.status} without the usage text:\n  {response.body[:400]}"
        )
    return response.body


def main(argv: Sequence[str]) -> int:
    extra = argv[0] if argv else ""
    if extra not in ENTRY_MODULES:
        print(f"usage: slim_probe.py {'|'.join(ENTRY_MODULES)}", file=sys.stderr)
        return 2
    try:
        check_not_installed(extra)
        for module in ENTRY_MODULES[extra]:
            import_entry(extra, module)
        print(f"[{extra}] entry modules load {len(_project_modules())} project modules")
        if extra == "bot":
            answer_help_over_slack()
            print("[bot] a signed /replay help is answered with the usage text")
    except ProbeFailure as failure:
        print(f"FAIL [{extra}]: {failure}", file=sys.stderr)
        return 1
    except Exception:
        print(f"FAIL [{extra}]: unexpected error:\n{traceback.format_exc()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
