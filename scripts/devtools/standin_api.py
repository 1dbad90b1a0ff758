"""The Slack stand-in's state and Web API methods: what it holds and how each method answers.

`WebApi.answer(method, params)` returns Slack's JSON answer (`ok`, or an error code) for the methods
this app uses; `State` is everything the stand-in remembers (calls, messages with edits applied,
channel set-ups, uploaded files). The HTTP server around it is `scripts.devtools.slack_standin`.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

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


@dataclass(frozen=True)
class ChannelSetup:
    """How a channel treats the bot; channels never set up are ones it is a member of."""

    member: bool = True
    archived: bool = False
    private: bool = False

    def refusal(self) -> str | None:
        """Slack's error for posting here, or None when a post would go through."""
        if self.archived:
            return "is_archived"
        if not self.member:
            return "channel_not_found" if self.private else "not_in_channel"
        return None


@dataclass
class StoredFile:
    """A file as `files.getUploadURLExternal` announced it; `data` once its bytes were uploaded."""

    id: str
    name: str
    length: int
    title: str | None = None
    data: bytes | None = None
    channel: str | None = None
    thread_ts: str | None = None


@dataclass
class State:
    calls: list[Call] = field(default_factory=list)
    messages: dict[tuple[str, str], Posted] = field(default_factory=dict)
    channels: dict[str, ChannelSetup] = field(default_factory=dict)
    files: dict[str, StoredFile] = field(default_factory=dict)
    ephemerals: list[dict[str, Any]] = field(default_factory=list)
    zones: dict[str, str | None] = field(default_factory=dict)  # user -> `tz` (None: no zone); else UTC
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


# --- the methods --------------------------------------------------------------------------------------


def json_field(value: Any) -> Any:
    """Form-encoded calls send `blocks` as a JSON string; JSON calls send it as a list."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


class WebApi:
    """The methods: each takes params and returns Slack's JSON answer (ok or an error code)."""

    def __init__(self, state: State, base_url: Callable[[], str]) -> None:
        self._state = state
        self._base_url = base_url

    def _ts(self) -> str:
        return f"{int(time.time())}.{next(self._state.sequence):06d}"

    def _refusal(self, channel: str) -> str | None:
        with self._state.lock:
            setup = self._state.channels.get(channel)
        return setup.refusal() if setup is not None else None

    def file_url(self, file_id: str) -> str:
        return f"{self._base_url()}/_standin/files/{file_id}"

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
        if refusal := self._refusal(channel):
            return {"ok": False, "error": refusal}
        if not params.get("text") and not params.get("blocks"):
            return {"ok": False, "error": "no_text"}
        posted = Posted(
            channel=channel,
            ts=self._ts(),
            text=params.get("text") or "",
            blocks=json_field(params.get("blocks")) or [],
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
        if refusal := self._refusal(key[0]):
            return {"ok": False, "error": refusal}
        with self._state.lock:
            posted = self._state.messages.get(key)
            if posted is None:
                return {"ok": False, "error": "message_not_found"}
            posted.text = params.get("text") or posted.text
            posted.blocks = json_field(params.get("blocks")) or posted.blocks
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

    def m_conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel") or "")
        with self._state.lock:
            setup = self._state.channels.get(channel, ChannelSetup())
        if not channel or (setup.private and not setup.member):
            return {"ok": False, "error": "channel_not_found"}
        im = channel.startswith("D")
        info = {
            "id": channel,
            "is_channel": not im and not setup.private,
            "is_group": setup.private,
            "is_im": im,
            "is_private": setup.private or im,
            "is_archived": setup.archived,
            "is_member": setup.member,
        }
        return {"ok": True, "channel": info}

    def m_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        name, length = params.get("filename"), str(params.get("length") or "")
        if not name:
            return {"ok": False, "error": "invalid_arguments"}
        if not length.isdigit() or int(length) <= 0:
            return {"ok": False, "error": "invalid_length"}
        file_id = f"F0{next(self._state.sequence):08d}"
        with self._state.lock:
            self._state.files[file_id] = StoredFile(id=file_id, name=str(name), length=int(length))
        return {"ok": True, "upload_url": f"{self._base_url()}/upload/v1/{file_id}", "file_id": file_id}

    def upload(self, file_id: str, data: bytes) -> tuple[int, str]:
        """Step 2 of an upload: the bytes for an announced file (HTTP status and body, as Slack's)."""
        with self._state.lock:
            stored = self._state.files.get(file_id)
            if stored is None:
                return 404, "file not found"
            if len(data) != stored.length:
                return 400, f"length mismatch: announced {stored.length}, received {len(data)}"
            stored.data = data
        return 200, f"OK - {len(data)}"

    def m_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        listed = json_field(params.get("files"))
        if not isinstance(listed, list) or not listed:
            return {"ok": False, "error": "invalid_arguments"}
        channel, thread_ts = params.get("channel_id") or None, params.get("thread_ts") or None
        if channel and (refusal := self._refusal(channel)):
            return {"ok": False, "error": refusal}
        with self._state.lock:
            found = [self._state.files.get(str(item.get("id"))) for item in listed]
            if any(f is None or f.data is None for f in found):
                return {"ok": False, "error": "file_not_found"}
            shared = [f for f in found if f is not None]
            for stored, item in zip(shared, listed, strict=True):
                stored.title = item.get("title") or stored.name
                stored.channel, stored.thread_ts = channel, thread_ts
        described = [self._describe(f) for f in shared]
        if channel:
            posted = Posted(
                channel=channel,
                ts=self._ts(),
                text=params.get("initial_comment") or "",
                blocks=[],
                thread_ts=thread_ts,
                files=described,
            )
            with self._state.lock:
                self._state.messages[(channel, posted.ts)] = posted
        return {"ok": True, "files": described}

    def _describe(self, stored: StoredFile) -> dict[str, Any]:
        return {
            "id": stored.id,
            "name": stored.name,
            "title": stored.title,
            "size": stored.length,
            "mimetype": "image/png" if stored.name.endswith(".png") else "application/octet-stream",
            "url_private": self.file_url(stored.id),
        }

    def m_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = params.get("user")
        if not user:
            return {"ok": False, "error": "user_not_found"}
        with self._state.lock:
            tz = self._state.zones.get(user, "UTC")
        profile: dict[str, Any] = {"id": user, "name": user.lower(), "real_name": user}
        if tz is not None:  # as Slack answers: the IANA name, its label and its offset now, in seconds
            offset = datetime.now(ZoneInfo(tz)).utcoffset() or timedelta(0)
            profile.update(tz=tz, tz_label=tz, tz_offset=int(offset.total_seconds()))
        return {"ok": True, "user": profile}
