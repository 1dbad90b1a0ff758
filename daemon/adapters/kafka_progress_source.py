"""`KafkaProgressSource`: the confirmed count of a running job, read from its progress beacons.

Each sample carries the newest beacon's own timestamp, so rates divide by the job's clock, not by
when the daemon happened to poll.

One `ProgressReader` per followed run, kept between watcher ticks so each probe reads only what is
new on the progress topic; a new one (a run just launched, or a daemon just restarted) starts at the
run's submission, not at the shared topic's beginning. A broker hiccup yields `None` (no sample this
tick), never an error.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping

import structlog
from confluent_kafka import KafkaException

from daemon.core.partitions import PartitionProgress, PartitionState
from daemon.usecases.ports import ProgressSample, ProgressSource
from spark_job.progress import Beacon, ProgressReader, latest_per_attempt, newest_per_partition

log = structlog.get_logger(__name__)


class KafkaProgressSource(ProgressSource):
    def __init__(self, *, kafka_config: Mapping[str, str], topic: str, timeout_s: float = 5.0) -> None:
        self._kafka = dict(kafka_config)
        self._topic = topic
        self._timeout_s = timeout_s
        self._readers: dict[str, ProgressReader] = {}
        self._lock = threading.Lock()

    def sample(self, run_id: str, since: float | None = None) -> ProgressSample | None:
        with self._lock:
            reader = self._readers.get(run_id)
            if reader is None:
                reader = ProgressReader(kafka=self._kafka, topic=self._topic, run_id=run_id, since=since)
                self._readers[run_id] = reader
            try:
                snapshot = reader.read(timeout_s=self._timeout_s)
            except (KafkaException, TimeoutError) as exc:
                log.warning("progress not readable this time", run_id=run_id, error=str(exc))
                return None
            lines = partition_lines(reader.beacons())
            return ProgressSample(confirmed=snapshot.confirmed, at=snapshot.at, partitions=lines)

    def forget(self, run_id: str) -> None:
        with self._lock:
            reader = self._readers.pop(run_id, None)
        if reader is not None:
            reader.close()

    def forget_all_but(self, run_ids: Collection[str]) -> None:
        with self._lock:
            gone = [self._readers.pop(run_id) for run_id in self._readers.keys() - set(run_ids)]
        for reader in gone:
            reader.close()

    def close(self) -> None:
        with self._lock:
            readers, self._readers = list(self._readers.values()), {}
        for reader in readers:
            reader.close()


def partition_lines(beacons: Iterable[Beacon]) -> tuple[PartitionProgress, ...]:
    """Each partition as its beacons tell it: the highest attempt's latest count (what the run's total
    adds up), how many attempts were heard of, and whether the latest one ended or failed."""
    beacons = list(beacons)
    tries: dict[int, int] = {}
    for partition, _ in latest_per_attempt(beacons):
        tries[partition] = tries.get(partition, 0) + 1
    lines = []
    for partition, beacon in sorted(newest_per_partition(beacons).items()):
        state = (
            PartitionState.FAILED
            if beacon.failed
            else PartitionState.DONE
            if beacon.done
            else PartitionState.SENDING
        )
        lines.append(
            PartitionProgress(partition, beacon.rows, beacon.partition_total, tries[partition], state)
        )
    return tuple(lines)
