"""`KafkaAdmin`: the one place the daemon talks to Kafka's admin API.

confluent-kafka's `KafkaException` is translated here, once, into `Unavailable` (broker unreachable)
or `BadRequest` (the broker refused what we asked), so callers deal in domain errors only.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from daemon.core.errors import BadRequest, Unavailable
from daemon.usecases.ports import TopicAdmin, TopicInfo

log = structlog.get_logger(__name__)


class KafkaAdmin(TopicAdmin):
    """Create, describe and delete topics; every call has a timeout and fails with a clear reason."""

    def __init__(self, *, config: Mapping[str, str], timeout_s: float = 10.0) -> None:
        self._config = dict(config)
        self._timeout_s = timeout_s
        self._client = AdminClient({**self._config, "socket.timeout.ms": int(timeout_s * 1000)})

    def _unreachable(self, exc: Exception) -> Unavailable:
        where = self._config.get("bootstrap.servers", "?")
        return Unavailable(f"Kafka at {where} is unreachable ({exc}); nothing was created")

    def describe(self, topic: str) -> TopicInfo | None:
        """The topic's partition count and config, or None when it does not exist."""
        try:
            metadata = self._client.list_topics(topic=topic, timeout=self._timeout_s)
        except KafkaException as exc:
            raise self._unreachable(exc) from exc
        found = metadata.topics.get(topic)
        if found is None:
            return None
        if found.error is not None:
            if found.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise Unavailable(f"cannot describe topic '{topic}': {found.error.str()}")
            return None
        return TopicInfo(name=topic, partitions=len(found.partitions), config=self._topic_config(topic))

    def _topic_config(self, topic: str) -> dict[str, str]:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        try:
            entries = self._client.describe_configs([resource])[resource].result(timeout=self._timeout_s)
        except KafkaException as exc:
            raise self._unreachable(exc) from exc
        return {name: entry.value for name, entry in entries.items() if entry.value is not None}

    def create(self, topic: str, *, partitions: int, config: Mapping[str, str]) -> TopicInfo:
        """Create a topic; an existing topic with the same name is an error, never silently reused."""
        new = NewTopic(topic, num_partitions=partitions, replication_factor=-1, config=dict(config))
        future = self._client.create_topics([new], operation_timeout=self._timeout_s)[topic]
        try:
            future.result(timeout=self._timeout_s)
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                raise BadRequest(f"topic '{topic}' already exists") from exc
            if error is not None and error.code() in (
                KafkaError._TRANSPORT,
                KafkaError._TIMED_OUT,
                KafkaError._ALL_BROKERS_DOWN,
            ):
                raise self._unreachable(exc) from exc
            raise BadRequest(f"Kafka refused to create topic '{topic}': {exc}") from exc
        log.info("topic created", topic=topic, partitions=partitions)
        return TopicInfo(name=topic, partitions=partitions, config=dict(config))

    def delete(self, topic: str) -> bool:
        """Delete a topic; returns False if it was already gone (so de-provisioning can be re-run)."""
        future = self._client.delete_topics([topic], operation_timeout=self._timeout_s)[topic]
        try:
            future.result(timeout=self._timeout_s)
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return False
            raise self._unreachable(exc) from exc
        log.info("topic deleted", topic=topic)
        return True
