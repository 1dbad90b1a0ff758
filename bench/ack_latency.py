"""How fast does the bot acknowledge a burst of `/replay` commands? Slack gives up after 3 seconds.

    python bench/ack_latency.py                 # starts a bot on a local Slack and daemon stand-in
    python bench/ack_latency.py -n 200 --daemon-delay-ms 1000
    python bench/ack_latency.py --url http://127.0.0.1:3000/slack/events --signing-secret ...

Sends N correctly signed slash commands at once and prints `ack p50=… p99=… max=…` in milliseconds
(the time until the HTTP response, which is the ack), then how long the lazy half took to answer
all of them through `response_url`. Exits 1 when p99 >= 1 s or max >= 3 s.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import math
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: import scripts.devtools

from bot.server import ServerThread, start_in_thread
from scripts.devtools.slack_standin import SlackStandin
from scripts.stray_jobs import interrupt_on_sigterm

SECRET = "bench-signing-secret"  # noqa: S105 (the local bot this script starts)
API_TOKEN = "bench-api-token"  # noqa: S105
GOAL_P99_MS, GOAL_MAX_MS = 1_000.0, 3_000.0


def standin_daemon(delay_s: float) -> Starlette:
    """Accepts every replay after `delay_s`, like a daemon busy counting rows."""

    async def create(request: Request) -> JSONResponse:
        body = await request.json()
        await asyncio.sleep(delay_s)
        run_id = f"r-{uuid.uuid4().hex[:12]}"
        run = {  # a `RunCreated` of the wire contract, as the real daemon answers
            "id": run_id,
            "kind": "replay",
            "state": "queued",
            "source": body["source"],
            "window": body["window"],
            "topic": f"replay.{body['source']}.{run_id}",
            "tps": body.get("tps", 1000),
            "requester": request.headers.get("x-replay-actor"),
            "rows_planned": 1000,
            "rows_selected": None,
            "confirmed": 0,
            "achieved_tps": None,
            "failed_tasks": 0,
            "duplicates": 0,
            "failure_reason": None,
            "created_at": "2024-05-01T10:00:00+00:00",
            "started_at": None,
            "ended_at": None,
            "slack_channel": body.get("slack_channel"),
            "slack_ts": None,
            "created": True,
        }
        return JSONResponse(run, status_code=201)

    return Starlette(routes=[Route("/v1/replays", create, methods=["POST"])])


def start_local_bot(
    standin: SlackStandin, delay_s: float
) -> tuple[str, subprocess.Popen[bytes], ServerThread]:
    """`python -m bot.server` in its own process (as `replay-bot` runs), so this client's load
    does not share the bot's interpreter; the Slack and daemon stand-ins stay in this one."""
    daemon = start_in_thread(standin_daemon(delay_s))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLAY_")}
    env.update(
        {
            "REPLAY_SLACK_BOT_TOKEN": "xoxb-bench",
            "REPLAY_SLACK_SIGNING_SECRET": SECRET,
            "REPLAY_SLACK_API_URL": standin.base_url,
            "REPLAY_DAEMON_URL": daemon.url,
            "REPLAY_API_TOKEN": API_TOKEN,
            "REPLAY_BOT_PORT": str(port),
            "REPLAY_LOG_LEVEL": "WARNING",
        }
    )
    bot = subprocess.Popen([sys.executable, "-m", "bot.server"], env=env)
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            if bot.poll() is not None or time.monotonic() > deadline:
                daemon.stop()
                raise RuntimeError("the bot did not start") from None
            time.sleep(0.1)
    return f"http://127.0.0.1:{port}/slack/events", bot, daemon


def signed(text: str, *, secret: str, response_url: str) -> tuple[bytes, dict[str, str]]:
    body = urlencode(
        {
            "team_id": "T0BENCH",
            "channel_id": "C0BENCH",
            "user_id": "U0BENCH",
            "command": "/replay",
            "text": text,
            "response_url": response_url,
            "trigger_id": uuid.uuid4().hex,
        }
    )
    stamp = str(int(time.time()))
    digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
    headers = {
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    return body.encode(), headers


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile: the smallest value with at least `share` of the values at or below."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


async def burst(url: str, requests: list[tuple[bytes, dict[str, str]]]) -> list[tuple[int, float]]:
    limits = httpx.Limits(max_connections=len(requests), max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:

        async def one(body: bytes, headers: dict[str, str]) -> tuple[int, float]:
            start = time.perf_counter()
            response = await client.post(url, content=body, headers=headers)
            return response.status_code, (time.perf_counter() - start) * 1000

        return await asyncio.gather(*(one(body, headers) for body, headers in requests))


def run(args: argparse.Namespace) -> dict[str, Any]:
    with SlackStandin() as standin:
        url, secret = args.url, args.signing_secret
        local: tuple[subprocess.Popen[bytes], ServerThread] | None = None
        if url is None:
            url, bot, daemon = start_local_bot(standin, args.daemon_delay_ms / 1000)
            local = (bot, daemon)
            secret = SECRET
            asyncio.run(burst(url, [signed("help", secret=secret, response_url=standin.response_url("w"))]))
        try:
            keys = [f"bench-{i}" for i in range(args.n)]
            requests = [signed(args.text, secret=secret, response_url=standin.response_url(k)) for k in keys]
            started = time.perf_counter()
            results = asyncio.run(burst(url, requests))
            answered = started
            if args.replies:
                answered = standin.wait_until(
                    lambda: all(standin.responses(k) for k in keys) and time.perf_counter(),
                    timeout_s=args.reply_timeout_s,
                    what="a response_url reply to every command",
                )
        finally:
            if local:
                bot, daemon = local
                bot.terminate()
                bot.wait(timeout=10)
                daemon.stop()
    latencies = [ms for _, ms in results]
    return {
        "n": args.n,
        "statuses": sorted({status for status, _ in results}),
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
        "max": max(latencies),
        "replies_s": answered - started,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=50, help="concurrent slash commands (default 50)")
    parser.add_argument("--url", help="a running bot's /slack/events (default: start one here)")
    parser.add_argument("--signing-secret", default=SECRET, help="the running bot's signing secret")
    parser.add_argument("--text", default="orders 2024-01-01..2024-01-07 tps=10000")
    parser.add_argument("--daemon-delay-ms", type=float, default=200.0, help="stand-in daemon latency")
    parser.add_argument("--reply-timeout-s", type=float, default=60.0)
    parser.add_argument(
        "--replies",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wait for every command's response_url reply (--no-replies for ack-only commands like help)",
    )
    args = parser.parse_args(argv)
    result = run(args)
    print(
        f"ack p50={result['p50']:.1f} p99={result['p99']:.1f} max={result['max']:.1f} (ms), "
        f"n={result['n']}, http={result['statuses']}"
        + (f"; all {result['n']} replies after {result['replies_s']:.2f}s" if args.replies else "")
    )
    ok = result["statuses"] == [200] and result["p99"] < GOAL_P99_MS and result["max"] < GOAL_MAX_MS
    if not ok:
        print(
            f"goal missed: p99 < {GOAL_P99_MS:.0f} ms and max < {GOAL_MAX_MS:.0f} ms, HTTP 200",
            file=sys.stderr,
        )
    return 0 if ok else 1


if __name__ == "__main__":
    interrupt_on_sigterm()  # a SIGTERM still stops the broker and daemons this run started
    raise SystemExit(main())
