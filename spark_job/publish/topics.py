"""Topic checks the driver makes before any task publishes.

Auto-create is disabled on our brokers, so a missing target topic would otherwise surface minutes
later as per-record timeouts in every task; checking first turns it into one clear reason. The
progress topic is the job's own, so it is created when missing.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from spark_job.errors import TopicError
from spark_job.kafka_conf import client_config
from spark_job.spec.model import KafkaValue


def topic_partitions(kafka: Mapping[str, KafkaValue], topic: str, *, timeout_s: float = 15.0) -> int:
    """The partition count of ``topic``; ``TopicError`` if it does not exist or the cluster is unreachable."""
    admin = AdminClient(client_config(kafka))
    try:
        metadata = admin.list_topics(topic=topic, timeout=timeout_s)
    except KafkaException as exc:
        raise TopicError(f"cannot reach Kafka to look up topic '{topic}': {_text(exc)}") from exc
    found = metadata.topics.get(topic)
    error = None if found is None else found.error
    if found is None or (error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise TopicError(f"topic '{topic}' does not exist on the cluster")
    if error is not None:
        raise TopicError(f"cannot use topic '{topic}': {error.str()}")
    return len(found.partitions)


def ensure_topic(
    kafka: Mapping[str, KafkaValue],
    topic: str,
    *,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    timeout_s: float = 15.0,
) -> None:
    """Create ``topic`` unless it exists; a concurrent creation by another job is fine."""
    try:
        topic_partitions(kafka, topic, timeout_s=timeout_s)
        return
    except TopicError as exc:
        if "does not exist" not in str(exc):
            raise
    admin = AdminClient(client_config(kafka))
    request = NewTopic(topic, num_partitions=partitions, config=dict(config or {}))
    future = admin.create_topics([request], operation_timeout=timeout_s, request_timeout=timeout_s)[topic]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise TopicError(f"cannot create topic '{topic}': {_text(exc)}") from exc


def set_topic_config(
    kafka: Mapping[str, KafkaValue], topic: str, config: Mapping[str, str], *, timeout_s: float = 15.0
) -> None:
    """Set these entries of ``topic``'s config (the others stay as they are); ``TopicError`` if refused."""
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in config.items()
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    admin = AdminClient(client_config(kafka))
    try:
        admin.incremental_alter_configs([resource], request_timeout=timeout_s)[resource].result(timeout_s)
    except KafkaException as exc:
        raise TopicError(f"cannot set {', '.join(sorted(config))} of topic '{topic}': {_text(exc)}") from exc


def _text(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)


def topic_max_message_bytes(
    kafka: Mapping[str, KafkaValue], topic: str, *, timeout_s: float = 15.0
) -> int | None:
    """The topic's effective ``max.message.bytes``; None when the cluster does not say (no rights)."""
    admin = AdminClient(client_config(kafka))
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        configs = admin.describe_configs([resource], request_timeout=timeout_s)[resource].result(timeout_s)
    except KafkaException:
        return None
    entry = configs.get("max.message.bytes")
    return int(entry.value) if entry is not None and entry.value else None
