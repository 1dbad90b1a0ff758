"""`KafkaTopicAdmin`: the one place the daemon talks to Kafka's admin API.

confluent-kafka's `KafkaException` is translated here, once, into `DependencyDown` (the broker did not
answer) or `BadRequest` (the broker refused what we asked), so callers deal in domain errors only.

Every call is bounded by `timeout_s` (a few seconds): a request waiting on a broker that is down is
answered "Kafka at <where> is not answering" well before a client gives up on the daemon. Only a
create or a delete, once the broker has answered, may take the longer `operation_timeout_s`.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from daemon.core.errors import BadRequest, DependencyDown, Unavailable
from daemon.usecases.ports import TopicAdmin, TopicInfo

log = structlog.get_logger(__name__)

KAFKA = "kafka"
ANSWER_TIMEOUT_S = 3.0  # a healthy broker answers metadata in milliseconds; silence this long is "down"
OPERATION_TIMEOUT_S = 30.0  # a topic created or deleted on a broker that did answer
_UNREACHABLE = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN})


def _kafka_error(exc: KafkaException) -> KafkaError | None:
    return exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None


class KafkaTopicAdmin(TopicAdmin):
    """Create, describe and delete topics; every call has a timeout and fails with a clear reason."""

    def __init__(
        self,
        *,
        config: Mapping[str, str],
        timeout_s: float = ANSWER_TIMEOUT_S,
        operation_timeout_s: float = OPERATION_TIMEOUT_S,
    ) -> None:
        self._config = dict(config)
        self._timeout_s = timeout_s
        self._operation_timeout_s = operation_timeout_s
        self._client = AdminClient({**self._config, "socket.timeout.ms": int(timeout_s * 1000)})

    @property
    def where(self) -> str:
        """The bootstrap servers: where a message about a silent broker says we looked."""
        return self._config.get("bootstrap.servers", "?")

    def _down(self, consequence: str) -> DependencyDown:
        message = f"Kafka at {self.where} is not answering ({self._timeout_s:g} s)"
        return DependencyDown(KAFKA, self.where, f"{message}; {consequence}" if consequence else message)

    def ping(self) -> None:
        """Ask the cluster for its broker list within `timeout_s`; `DependencyDown` when it is silent."""
        self._answering("")

    def describe(self, topic: str) -> TopicInfo | None:
        """The topic's partition count and config, or None when it does not exist."""
        try:
            metadata = self._client.list_topics(topic=topic, timeout=self._timeout_s)
        except KafkaException as exc:
            raise self._down("nothing was created") from exc
        found = metadata.topics.get(topic)
        if found is None:
            return None
        if found.error is not None:
            if found.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise Unavailable(f"cannot describe topic '{topic}': {found.error.str()}")
            return None
        return TopicInfo(name=topic, partitions=len(found.partitions), config=self._topic_config(topic))

    def names(self, prefix: str) -> list[str]:
        try:
            metadata = self._client.list_topics(timeout=self._timeout_s)
        except KafkaException as exc:
            raise self._down("no topic was looked at") from exc
        return sorted(name for name in metadata.topics if name.startswith(prefix))

    def _topic_config(self, topic: str) -> dict[str, str]:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        try:
            future = self._client.describe_configs([resource], request_timeout=self._timeout_s)[resource]
            entries = future.result(timeout=self._timeout_s)
        except KafkaException as exc:
            raise self._down("nothing was created") from exc
        return {name: entry.value for name, entry in entries.items() if entry.value is not None}

    def create(self, topic: str, *, partitions: int, config: Mapping[str, str]) -> TopicInfo:
        """Create a topic; an existing topic with the same name is an error, never silently reused."""
        self._answering("nothing was created")
        new = NewTopic(topic, num_partitions=partitions, replication_factor=-1, config=dict(config))
        future = self._client.create_topics(
            [new], operation_timeout=self._operation_timeout_s, request_timeout=self._request_timeout_s
        )[topic]
        try:
            future.result(timeout=self._request_timeout_s)
        except KafkaException as exc:
            error = _kafka_error(exc)
            if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                raise BadRequest(f"topic '{topic}' already exists") from exc
            if error is not None and error.code() in _UNREACHABLE:
                raise self._down("nothing was created") from exc
            raise BadRequest(f"Kafka refused to create topic '{topic}': {exc}") from exc
        log.info("topic created", topic=topic, partitions=partitions)
        return TopicInfo(name=topic, partitions=partitions, config=dict(config))

    def delete(self, topic: str) -> bool:
        """Delete a topic; returns False if it was already gone (so de-provisioning can be re-run)."""
        self._answering(f"topic '{topic}' was not deleted")
        future = self._client.delete_topics(
            [topic], operation_timeout=self._operation_timeout_s, request_timeout=self._request_timeout_s
        )[topic]
        try:
            future.result(timeout=self._request_timeout_s)
        except KafkaException as exc:
            error = _kafka_error(exc)
            if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return False
            raise self._down(f"topic '{topic}' was not deleted") from exc
        log.info("topic deleted", topic=topic)
        return True

    @property
    def _request_timeout_s(self) -> float:
        return self._operation_timeout_s + self._timeout_s

    def _answering(self, consequence: str) -> None:
        """A change waits on the broker for up to `operation_timeout_s`: first make sure it answers."""
        try:
            self._client.list_topics(timeout=self._timeout_s)
        except KafkaException as exc:
            raise self._down(consequence) from exc
