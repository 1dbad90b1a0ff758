"""The ceiling the product is compared with: one process, one confluent-kafka Producer, the same bytes.

The records are the product's own, read back from its topic (key, value and every header), held in
memory, and sent with the job's unthrottled producer settings (``spark_job.kafka_conf.producer_config``,
with the daemon's tuning when the bench sets one) into a
fresh ``LogAppendTime`` topic with as many partitions. Its rate is taken from the broker's stamps,
first record to last, like the product's: no Spark, no schedule, no reading or encoding.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, Message, Producer

from bench.broker import Record
from spark_job.kafka_conf import producer_config


def send_all(
    bootstrap: str, target: str, records: list[Record], tuning: dict[str, int | str] | None = None
) -> None:
    """Produce every record and wait for every delivery report; fail loudly on any error."""
    confirmed = 0
    failed: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        nonlocal confirmed
        if error is None:
            confirmed += 1
        else:
            failed.append(error)

    config = producer_config({"bootstrap.servers": bootstrap, **(tuning or {})}, unthrottled=True)
    producer = Producer({**config, "on_delivery": on_delivery})
    for count, record in enumerate(records):
        headers: list[tuple[str, str | bytes | None]] = list(record.headers)
        while True:
            try:
                producer.produce(target, record.value, record.key, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
        if count % 1000 == 0:
            producer.poll(0)
    producer.flush()
    if failed or confirmed != len(records):
        raise SystemExit(f"bare loop: {confirmed} confirmed of {len(records)}, errors {failed[:3]}")
