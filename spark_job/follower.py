"""Reading a run's records off its topic while it publishes, so its verdict needs only the tail.

The end-of-run reconcile (`spark_job.reconcile`, docs/rules.md rule 9) compares the ids a run
selected with the ids its records carry within the offset ranges the driver snapshotted. Reading
those ranges after the last event costs seconds per million records. A `TopicFollower` reads them
as they are written instead: one consumer on the driver, assigned to every partition of the run's
topic from the end offsets taken before the first send, keeps the event id of each record carrying
the run's id and how many records it read. When publishing has ended and the end offsets are known,
`finish` reads what is left below them and returns exactly what reading ``[lo, hi)`` afterwards
would have: records at or above ``hi`` (another producer's, on a live topic) are not counted.

Memory: the run's own ids as Arrow strings (bounded by the selection, which the driver path
bounds) and their offsets, and per partition the offset ranges read as contiguous spans, so other
producers' traffic costs a few integers, not one per record (rule 11).
"""

from __future__ import annotations

import bisect
import threading
import time
import uuid
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa
from confluent_kafka import Consumer, KafkaException, TopicPartition

from spark_job.kafka_conf import bulk_reader_config
from spark_job.reconcile import Headers, encoded_runs, event_id_of
from spark_job.spec.model import KafkaValue, OffsetRanges

POLL_S = 0.2
BATCH = 2_000
FINISH_LIMIT_S = 300.0  # the tail however large: past it, the ranges are read back instead
CHUNK_IDS = 10_000  # ids kept as Python strings before they become one Arrow array


@dataclass
class _Partition:
    """What was read of one partition: its run's ids (Arrow chunks, about 50 bytes an id) with their
    offsets, and every offset read as contiguous spans ``[start, end)``."""

    chunks: list[pa.Array] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    id_offsets: array[int] = field(default_factory=lambda: array("q"))
    spans: list[list[int]] = field(default_factory=list)
    next_offset: int = -1

    def read(self, offset: int, event_id: str | None) -> None:
        if offset < self.next_offset:  # a reset (an unclean leader election): the spans would lie
            raise ValueError(f"offset {offset} read again after {self.next_offset - 1}")
        if self.spans and self.spans[-1][1] == offset:
            self.spans[-1][1] = offset + 1
        else:
            self.spans.append([offset, offset + 1])
        self.next_offset = offset + 1
        if event_id is not None:
            self.pending.append(event_id)
            self.id_offsets.append(offset)
            if len(self.pending) >= CHUNK_IDS:
                self.chunks.append(pa.array(self.pending, pa.string()))
                self.pending = []

    def below(self, hi: int) -> tuple[pa.ChunkedArray, int]:
        """The run's ids and the number of records read at offsets below ``hi``."""
        kept = bisect.bisect_left(self.id_offsets, hi)
        ids = pa.chunked_array([*self.chunks, pa.array(self.pending, pa.string())], pa.string())
        scanned = sum(max(0, min(end, hi) - start) for start, end in self.spans)
        return ids.slice(0, kept), scanned


class TopicFollower:
    """A thread reading ``topic`` from ``start`` (partition to first offset) for ``run_id``'s ids."""

    def __init__(
        self, kafka: Mapping[str, KafkaValue], topic: str, start: Mapping[int, int], run_id: str
    ) -> None:
        self._kafka = dict(kafka)
        self._topic = topic
        self._start = dict(start)
        self._runs = encoded_runs(run_id)
        self._partitions = {partition: _Partition(next_offset=lo) for partition, lo in self._start.items()}
        self._until: dict[int, int] | None = None
        self._idle_timeout_s = 0.0
        self._stop = threading.Event()
        self._failure: Exception | None = None
        self._complete = False  # set by the thread only once every partition was read up to its hi
        self._thread = threading.Thread(target=self._follow, name=f"follow-{topic}", daemon=True)

    def start(self) -> TopicFollower:
        self._thread.start()
        return self

    def finish(self, until: OffsetRanges, *, idle_timeout_s: float) -> tuple[pa.ChunkedArray, int]:
        """The run's ids and the records read in ``[lo, hi)`` of every partition, once the thread has
        read up to each ``hi``. Raises what stopped the thread; TimeoutError when a partition still
        short of its ``hi`` moves no further for ``idle_timeout_s``, or the whole tail takes longer
        than ``FINISH_LIMIT_S``; RuntimeError when it stopped short for any other reason. Whatever
        it raises, nothing it read is used: the caller reads the ranges back."""
        unfollowed = {p for p, (lo, _) in until.partitions.items() if self._start.get(p) != lo}
        if until.topic != self._topic or unfollowed:
            self.close()
            raise ValueError(
                f"the follower of {self._topic} did not follow {until.topic} {sorted(unfollowed)} from there"
            )
        if self._stop.is_set():
            raise RuntimeError(f"the follower of {self._topic} was closed before the run's end")
        self._idle_timeout_s = idle_timeout_s
        self._until = {partition: hi for partition, (_, hi) in until.partitions.items()}
        self._thread.join(timeout=FINISH_LIMIT_S)
        if self._thread.is_alive():
            self.close()
            raise TimeoutError(
                f"the follower of {self._topic} did not reach the run's end in {FINISH_LIMIT_S:.0f}s"
            )
        if self._failure is not None:
            raise self._failure
        if not self._complete:
            raise RuntimeError(f"the follower of {self._topic} stopped short of the run's end offsets")
        chunks: list[pa.Array] = []
        scanned = 0
        for partition, hi in sorted(self._until.items()):
            found, read = self._partitions[partition].below(hi)
            chunks += found.chunks
            scanned += read
        return pa.chunked_array(chunks, pa.string()), scanned

    def close(self) -> None:
        """Stop reading (a run that failed or needs no verdict); safe to call twice."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    # --- the thread ---------------------------------------------------------------------------------

    def _follow(self) -> None:
        consumer: Consumer | None = None
        try:
            consumer = Consumer(
                {
                    **bulk_reader_config(self._kafka),
                    "group.id": f"replay-follow-{uuid.uuid4().hex}",  # assign() only: never joins or commits
                    "enable.auto.commit": False,
                    "enable.partition.eof": False,
                    "auto.offset.reset": "earliest",
                }
            )
            consumer.assign([TopicPartition(self._topic, p, lo) for p, lo in self._start.items()])
            progress = _Progress()
            while not self._stop.is_set():
                if self._until is not None and self._reached(consumer, self._until, progress):
                    self._complete = True
                    return
                for message in consumer.consume(num_messages=BATCH, timeout=POLL_S):
                    error = message.error()
                    if error is not None:
                        raise KafkaException(error)
                    offset, partition = message.offset(), message.partition()
                    if offset is None or partition is None or partition not in self._partitions:
                        continue
                    headers: Headers = message.headers()
                    self._partitions[partition].read(offset, event_id_of(headers, self._runs))
        except Exception as exc:  # handed to `finish`, which raises it on the driver's thread
            self._failure = exc
        finally:
            if consumer is not None:
                consumer.close()

    def _reached(self, consumer: Consumer, until: dict[int, int], progress: _Progress) -> bool:
        """Every partition read up to its ``hi``: by the records read, or (offsets no record takes,
        such as a transaction's markers) by the consumer's position. TimeoutError when the partitions
        still short move no further for the idle timeout, whatever other partitions receive."""
        short = [p for p, hi in until.items() if self._partitions[p].next_offset < hi]
        if not short:
            return True
        positions = consumer.position([TopicPartition(self._topic, p) for p in short])
        if all(tp.offset >= until[tp.partition] for tp in positions):
            return True
        if progress.stalled(sum(self._partitions[p].next_offset for p in short), self._idle_timeout_s):
            behind = {p: (self._partitions[p].next_offset, until[p]) for p in short}
            raise TimeoutError(
                f"nothing read from {self._topic} in {self._idle_timeout_s:.0f}s while short of the run's "
                f"end offsets (read up to, end): {behind}"
            )
        return False


@dataclass
class _Progress:
    """How far the short partitions have got, and since when they have not moved."""

    reached: int = -1
    since: float = field(default_factory=time.monotonic)

    def stalled(self, reached: int, idle_timeout_s: float) -> bool:
        now = time.monotonic()
        if reached != self.reached:
            self.reached, self.since = reached, now
        return now - self.since > idle_timeout_s
