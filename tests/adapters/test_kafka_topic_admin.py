"""`KafkaTopicAdmin`, the `TopicAdmin` port on the real broker: what it creates is what Kafka's own
`kafka-topics --describe` shows, an existing name is refused and left as it was, and deleting twice
is harmless (de-provisioning can be repeated)."""

from __future__ import annotations

import pytest

from daemon.adapters.kafka_topic_admin import KafkaTopicAdmin
from daemon.core.errors import BadRequest
from tests.fixtures.kafka import kafka_tool, unique_topic

pytestmark = [pytest.mark.kafka]

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONFIG = {"cleanup.policy": "delete", "retention.ms": "3600000", "message.timestamp.type": "CreateTime"}


@pytest.fixture
def admin(kafka_bootstrap: str) -> KafkaTopicAdmin:
    return KafkaTopicAdmin(config={"bootstrap.servers": kafka_bootstrap})


def kafka_says(bootstrap: str, topic: str) -> tuple[int, dict[str, str]]:
    """The partition count and the topic's own configs, as `kafka-topics --describe` prints them."""
    stdout = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
    head = next(line for line in stdout.splitlines() if line.startswith(f"Topic: {topic}\t"))
    fields = dict(part.split(": ", 1) for part in head.split("\t") if ": " in part)
    configs = dict(item.split("=", 1) for item in fields.get("Configs", "").split(",") if "=" in item)
    return int(fields["PartitionCount"]), configs


def test_a_created_topic_is_what_kafka_itself_describes(admin: KafkaTopicAdmin, kafka_bootstrap: str) -> None:
    topic = unique_topic("replay.admin")

    created = admin.create(topic, partitions=3, config=CONFIG)

    partitions, configs = kafka_says(kafka_bootstrap, topic)
    assert (created.name, created.partitions) == (topic, partitions) == (topic, 3)
    assert {key: configs[key] for key in CONFIG} == CONFIG
    described = admin.describe(topic)
    assert described is not None
    assert (described.partitions, {key: described.config[key] for key in CONFIG}) == (3, CONFIG)


def test_an_existing_name_is_refused_and_the_topic_is_left_as_it_was(
    admin: KafkaTopicAdmin, kafka_bootstrap: str
) -> None:
    topic = unique_topic("replay.admin")
    admin.create(topic, partitions=2, config=CONFIG)

    with pytest.raises(BadRequest, match=topic):
        admin.create(topic, partitions=5, config={**CONFIG, "retention.ms": "60000"})

    partitions, configs = kafka_says(kafka_bootstrap, topic)
    assert (partitions, configs["retention.ms"]) == (2, "3600000")


def test_a_missing_topic_is_none_and_deleting_twice_is_harmless(admin: KafkaTopicAdmin) -> None:
    topic = unique_topic("replay.admin")
    assert admin.describe(topic) is None
    admin.create(topic, partitions=1, config=CONFIG)

    assert admin.delete(topic) is True
    assert admin.describe(topic) is None
    assert admin.delete(topic) is False
