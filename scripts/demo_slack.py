"""Play a person in Slack for the demo: send `/replay …` to the bot, signed as Slack signs it, then
print the thread the platform posted, as it would look in the channel.

    python scripts/demo_slack.py --bot URL --standin URL --user U… --channel C… "orders 2024-01-01"
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from urllib.parse import urlencode

import httpx
from slack_sdk.signature import SignatureVerifier

from daemon.config.settings import load_settings
from daemon.contract.client import DaemonClient
from daemon.contract.models import RunOut


def signed_slash_command(
    text: str, *, user: str, channel: str, response_url: str, secret: str
) -> tuple[str, dict[str, str]]:
    body = urlencode(
        {
            "token": "demo",
            "team_id": "T0DEMO",
            "channel_id": channel,
            "channel_name": "incident-orders",
            "user_id": user,
            "user_name": "demo",
            "command": "/replay",
            "text": text,
            "response_url": response_url,
            "trigger_id": f"demo.{uuid.uuid4().hex}",
        }
    )
    stamp = str(int(time.time()))
    headers = {
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": str(SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)),
        "Content-Type": "application/x-www-form-urlencoded",
    }
    return body, headers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bot", required=True, help="the bot's /slack/events URL")
    parser.add_argument("--standin", required=True, help="the Slack stand-in's base URL")
    parser.add_argument("--user", required=True)
    parser.add_argument("--channel", required=True)
    parser.add_argument("text")
    args = parser.parse_args()
    settings = load_settings()
    assert settings.slack_signing_secret is not None and settings.api_token is not None

    body, headers = signed_slash_command(
        args.text,
        user=args.user,
        channel=args.channel,
        response_url=f"{args.standin}/response/demo",
        secret=settings.slack_signing_secret.get_secret_value(),
    )
    started = time.monotonic()
    ack = httpx.post(args.bot, content=body, headers=headers, timeout=10)
    took_ms = 1000 * (time.monotonic() - started)
    print(f"/replay {args.text}  ->  HTTP {ack.status_code}, acknowledged in {took_ms:.0f} ms")
    if ack.status_code != 200:
        print(ack.text, file=sys.stderr)
        return 1

    with DaemonClient(base_url=settings.daemon_url, token=settings.api_token.get_secret_value()) as daemon:
        deadline = time.monotonic() + 600
        run: RunOut | None = None
        while time.monotonic() < deadline:
            runs = daemon.list_replays(args.user, requester=args.user, limit=1).runs
            run = runs[0] if runs else None
            if run is not None and run.terminal:
                break
            time.sleep(1)
    time.sleep(2)  # the final reply and the parent's update follow the run's end
    print()
    print(httpx.get(f"{args.standin}/_standin/threads", timeout=10).text)
    return 0 if run is not None and run.state == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
