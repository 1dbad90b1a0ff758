"""The settings each kind of client gets from a run's ``kafka`` dict."""

from __future__ import annotations

from spark_job.kafka_conf import bulk_reader_config, client_config
from spark_job.spec.model import KafkaValue

RUN_KAFKA: dict[str, KafkaValue] = {
    "bootstrap.servers": "broker:9092",
    "security.protocol": "SASL_SSL",
    "linger.ms": 50,  # producer tuning: no consumer gets it
    "compression.type": "zstd",
}


def test_consumers_get_the_connection_and_security_settings_and_no_producer_tuning() -> None:
    assert client_config(RUN_KAFKA) == {"bootstrap.servers": "broker:9092", "security.protocol": "SASL_SSL"}


def test_a_bulk_reader_fetches_8_mib_a_partition_unless_the_run_says_otherwise() -> None:
    """1 MiB a partition (librdkafka's default) held one consumer to an eighth of what 8 MiB read."""
    assert bulk_reader_config(RUN_KAFKA) == {
        **client_config(RUN_KAFKA),
        "max.partition.fetch.bytes": 8 * 2**20,
    }
    own: dict[str, KafkaValue] = {**RUN_KAFKA, "max.partition.fetch.bytes": 2**20}
    assert bulk_reader_config(own)["max.partition.fetch.bytes"] == 2**20
