"""The request a *Publish to live topic* button carries, so a click needs no state in the bot.

The button's `value` holds the canonical command, who asked, where, when and a per-invocation nonce.
Slack returns it untouched with the click (the request is signed), so the bot can check the clicker,
the expiry and derive one Idempotency-Key per confirmation message: a double click creates one run.
`approvals` (the source's `live_approvals`) says whether the requester's click launches the run or
asks a second owner in the channel; the daemon enforces it either way, this only routes the click.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

CONFIRM_TTL_S = 15 * 60
_VERSION = 1


@dataclass(frozen=True)
class LiveRequest:
    command: str  # `daemon.core.grammar.render` of the ReplayCommand: parse() reads it back
    requester: str
    channel: str
    issued_at: int  # unix seconds
    nonce: str  # one per slash command invocation
    approvals: int = 1  # 2: another owner approves in the channel (absent from values written before)

    def encode(self) -> str:
        return json.dumps({"v": _VERSION, **asdict(self)}, separators=(",", ":"), sort_keys=True)

    @classmethod
    def decode(cls, value: str) -> LiveRequest:
        """The request in a button value; ValueError when it is not one we wrote."""
        try:
            data = json.loads(value)
            if data.pop("v") != _VERSION:
                raise ValueError("unknown confirmation version")
            request = cls(**data)
        except (TypeError, KeyError, AttributeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a confirmation value ({exc})") from None
        texts = (request.command, request.requester, request.channel, request.nonce)
        if not all(isinstance(t, str) for t in texts) or type(request.issued_at) is not int:
            raise ValueError("not a confirmation value (wrong field types)")
        if type(request.approvals) is not int or request.approvals not in (1, 2):
            raise ValueError("not a confirmation value (wrong field types)")
        return request

    def idempotency_key(self) -> str:
        """Same confirmation message, same key: the daemon returns the first run to a second click."""
        return "slack-live-" + hashlib.sha256(self.encode().encode()).hexdigest()[:40]

    def expired(self, now: float, ttl_s: float = CONFIRM_TTL_S) -> bool:
        return now - self.issued_at > ttl_s
