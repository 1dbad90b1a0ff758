"""Live control of a running replay: rate changes, pause and resume, through a Kafka control topic.

The daemon appends one message per change to the control topic (one partition; key = run id):
``{"run_id", "version", "changes": [{"at", "tps", "paused"}, ...]}``, every change so far, so the
newest version is the whole truth and a task that missed one message loses nothing. A change takes
effect at its ``at`` (wall-clock epoch seconds, set by the daemon a little ahead of now), the same
instant on every task, so the slots' shared schedule stays one grid (``spark_job.publish.timeline``).

Anyone who may write to the control topic could otherwise pause or speed up any run, so each
message is signed: header ``replay-signature`` is the HMAC-SHA256 of the value under the run's own
control key, which the daemon keeps on the run and the job gets in its spec (``control.key``). A task
ignores every message it cannot verify, unsigned or signed under another key, and a spec without a
key follows none. A key opens one run only, so a job's spec cannot steer another run.

Why a topic: the executors already reach the broker (they publish there, with the run's
credentials), wherever they run; they need not reach the daemon. A task reads the topic from the
offset in its spec (the end of the topic when the daemon wrote the spec), so it sees only what came
after, never the history of other runs.

    with ControlFeed(kafka=..., control=spec.control, run_id=spec.run_id) as feed:
        changes = feed.poll()   # None: nothing new; else the run's full list of changes
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import TracebackType

from confluent_kafka import Consumer, KafkaException, TopicPartition

from spark_job.kafka_conf import client_config
from spark_job.spec.model import Control, KafkaValue, RateChange

SIGNATURE_HEADER = "replay-signature"
CONTROL_PARTITION = 0  # the control topic has one partition: one order for every run's changes
POLL_EVERY_S = 0.25  # how often a task looks for a change; the daemon's lead is several times this


@dataclass(frozen=True)
class ControlMessage:
    """Every change of one run so far; a higher ``version`` supersedes a lower one."""

    run_id: str
    version: int
    changes: tuple[RateChange, ...]

    def encode(self) -> bytes:
        document = {
            "run_id": self.run_id,
            "version": self.version,
            "changes": [asdict(c) for c in self.changes],
        }
        return json.dumps(document, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> ControlMessage:
        """The message in ``data``; ``ValueError`` when it is not one the daemon wrote."""
        try:
            document = json.loads(data)
            changes = tuple(
                RateChange(at=float(item["at"]), tps=int(item["tps"]), paused=bool(item.get("paused", False)))
                for item in document["changes"]
            )
            return cls(run_id=str(document["run_id"]), version=int(document["version"]), changes=changes)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a control message ({exc})") from None


def signature(key: str, value: bytes) -> str:
    """The ``replay-signature`` of a control message's value under a run's control key (hex)."""
    return hmac.new(bytes.fromhex(key), value, hashlib.sha256).hexdigest()


# A message's headers, as confluent-kafka gives them.
Headers = list[tuple[str, str | bytes | None]] | dict[str, str | bytes | None] | None


def is_signed(key: str | None, value: bytes, headers: Headers) -> bool:
    """True when ``headers`` carry the value's signature under ``key`` (never without a key)."""
    if key is None:
        return False
    expected = signature(key, value).encode()
    pairs = headers.items() if isinstance(headers, dict) else headers or ()
    for name, given in pairs:
        if name == SIGNATURE_HEADER and given is not None:
            text = given.encode() if isinstance(given, str) else given
            if hmac.compare_digest(text, expected):
                return True
    return False


class ControlFeed:
    """One task's view of its run's control messages: ``poll()`` is cheap and never blocks long.

    Called from the publishing loop; it reads at most every ``POLL_EVERY_S`` and returns the newest
    full list of changes when a newer version arrived. A broker hiccup is not an error: the task
    keeps its current rate and looks again (the publisher's own producer fails the task if the
    broker is really gone).
    """

    def __init__(
        self,
        *,
        kafka: Mapping[str, KafkaValue],
        control: Control,
        run_id: str,
    ) -> None:
        self._key = run_id.encode()
        self._control_key = control.key
        self._run_id = run_id
        self.ignored = 0  # messages keyed for this run that did not verify
        self._version = 0
        self._next_at = 0.0
        config = {
            **client_config(kafka),
            "group.id": f"replay-control-{uuid.uuid4().hex}",  # never committed: offsets come from the spec
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
        self._consumer = Consumer(config)
        self._consumer.assign([TopicPartition(control.topic, CONTROL_PARTITION, control.offset)])

    def __enter__(self) -> ControlFeed:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._consumer.close()

    def poll(self, *, force: bool = False) -> tuple[RateChange, ...] | None:
        """The run's changes if a newer version arrived since the last call, else None."""
        now = time.monotonic()
        if not force and now < self._next_at:
            return None
        self._next_at = now + POLL_EVERY_S
        newest: ControlMessage | None = None
        try:
            messages = self._consumer.consume(num_messages=500, timeout=0)
        except KafkaException:
            return None
        for message in messages:
            value = message.value()
            if message.error() is not None or message.key() != self._key or value is None:
                continue
            if not is_signed(self._control_key, value, message.headers()):
                self._ignore()
                continue
            try:
                decoded = ControlMessage.decode(value)
            except ValueError:
                continue  # not ours to understand: never fail a task over a control message
            seen = newest.version if newest is not None else self._version
            if decoded.run_id == self._run_id and decoded.version > seen:
                newest = decoded
        if newest is None:
            return None
        self._version = newest.version
        return newest.changes

    def _ignore(self) -> None:
        self.ignored += 1
        if self.ignored == 1:  # once per task: the executor's log says someone tried
            print(
                f"run {self._run_id}: ignored a control message that is not signed with its key",
                file=sys.stderr,
            )
