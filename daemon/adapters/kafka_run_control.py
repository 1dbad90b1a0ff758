"""`KafkaRunControlChannel`: live rate changes on the control topic, the channel the running jobs read.

One partition (one order for every run's changes), key = run id; every message carries the run's whole
list of changes (``spark_job.control.ControlMessage``), so the newest one is the whole truth, signed
with the run's control key (header ``replay-signature``; the job follows nothing else). The topic
keeps messages longer than any run (``cleanup.policy=delete``): a job reads only from the offset in its
spec. confluent-kafka's `KafkaException` and delivery errors are translated here, once, into
`Unavailable`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, Sequence

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from daemon.core.errors import BadRequest, Unavailable
from daemon.core.run_control import RateChange
from daemon.usecases.job_specs import job_rate_changes
from daemon.usecases.ports import RunControlChannel, TopicAdmin
from spark_job.control import CONTROL_PARTITION, SIGNATURE_HEADER, ControlMessage, signature

log = structlog.get_logger(__name__)


class KafkaRunControlChannel(RunControlChannel):
    def __init__(
        self,
        *,
        config: Mapping[str, str],
        topic: str,
        topics: TopicAdmin,
        retention_ms: int,
        timeout_s: float = 10.0,
    ) -> None:
        self.topic = topic
        self._config = dict(config)
        self._topics = topics
        self._retention_ms = retention_ms
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._ready = False
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None

    def _unavailable(self, what: str, exc: object) -> Unavailable:
        where = self._config.get("bootstrap.servers", "?")
        return Unavailable(f"Kafka at {where}: {what} on the control topic '{self.topic}' failed ({exc})")

    def ensure_topic(self) -> None:
        if self._ready:
            return
        info = self._topics.describe(self.topic)
        if info is None:
            config = {"cleanup.policy": "delete", "retention.ms": str(self._retention_ms)}
            try:
                self._topics.create(self.topic, partitions=1, config=config)
            except BadRequest:
                if self._topics.describe(self.topic) is None:  # not a lost race with another daemon
                    raise
        elif info.partitions != 1:
            log.warning("the control topic has more than one partition; only 0 is used", topic=self.topic)
        self._ready = True

    def end_offset(self) -> int:
        self.ensure_topic()
        with self._lock:
            if self._consumer is None:
                self._consumer = Consumer(
                    {
                        **self._config,
                        "group.id": f"replayd-control-{uuid.uuid4().hex}",  # never joins nor commits
                        "enable.auto.commit": False,
                    }
                )
            partition = TopicPartition(self.topic, CONTROL_PARTITION)
            try:
                _, high = self._consumer.get_watermark_offsets(partition, timeout=self._timeout_s)
            except KafkaException as exc:
                raise self._unavailable("reading the end offset", exc) from exc
        return int(high)

    def publish(self, run_id: str, changes: Sequence[RateChange], *, key: str) -> None:
        self.ensure_topic()
        message = ControlMessage(
            run_id=run_id,
            version=len(changes),
            changes=job_rate_changes(changes),
        )
        value = message.encode()
        failures: list[KafkaError] = []

        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                failures.append(error)

        with self._lock:
            if self._producer is None:
                self._producer = Producer(
                    {
                        **self._config,
                        "enable.idempotence": True,
                        "acks": "all",
                        "message.timeout.ms": int(self._timeout_s * 1000),
                    }
                )
            try:
                self._producer.produce(
                    self.topic,
                    key=run_id.encode(),
                    value=value,
                    headers=[(SIGNATURE_HEADER, signature(key, value).encode())],
                    partition=CONTROL_PARTITION,
                    on_delivery=delivered,
                )
                left = self._producer.flush(self._timeout_s)
            except (KafkaException, BufferError) as exc:
                raise self._unavailable(f"sending version {message.version} of {run_id}", exc) from exc
        if failures or left:
            reason = failures[0].str() if failures else f"not delivered within {self._timeout_s:g}s"
            raise self._unavailable(f"sending version {message.version} of {run_id}", reason)
        log.info("rate change sent", run_id=run_id, version=message.version, topic=self.topic)

    def close(self) -> None:
        with self._lock:
            if self._producer is not None:
                self._producer.flush(self._timeout_s)
            if self._consumer is not None:
                self._consumer.close()
            self._producer = self._consumer = None
