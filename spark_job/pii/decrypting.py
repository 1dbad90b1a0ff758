"""Decrypt declared PII columns on the executors, between the Arrow batches and the publisher.

The record value is built in the JVM (``to_json(struct(*))``), so this step sits inside the publish
task: it reads each row's JSON, decrypts the declared columns and splices the plaintext into the
JSON text in place of the token. Every other byte of the value stays as Spark wrote it, and the
plaintext exists only in the publishing worker's memory, never in Spark's cache or shuffle files.

A value that does not decrypt either fails the task (``on_error=fail``: the reason names the column
and the row's event id, never the value) or goes, as the raw row JSON with the token untouched, to
the dead-letter topic (``on_error=dlq``) with ``replay-error`` / ``replay-event-id`` headers; the
DLQ records a successful task had confirmed are added to an accumulator, so
``confirmed + dlq == rows_selected``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer
from pyspark import Accumulator

from spark_job.arrow_map import ArrowMapFunction
from spark_job.errors import PublishError
from spark_job.kafka_conf import producer_config
from spark_job.pii.envelope import DecryptError, decrypt_value
from spark_job.pii.keys import KeyResolver
from spark_job.publish.publisher import DeliveryCounter, Header
from spark_job.publish.topics import ensure_topic
from spark_job.spec.decrypt import Decrypt
from spark_job.spec.model import JobSpec, provenance_headers

DLQ_FLUSH_S = 30.0


@dataclass(frozen=True)
class DecryptPlan:
    """What a task needs to decrypt, decided on the driver and shipped with the closure."""

    decrypt: Decrypt
    event_id_column: str
    producer: dict[str, Any]
    headers: list[Header]  # provenance headers, for DLQ records


def decrypting_body(spec: JobSpec, body: ArrowMapFunction, dlq_total: Accumulator[int]) -> ArrowMapFunction:
    """``body`` fed with decrypted batches; creates the DLQ topic when the spec asks for one."""
    assert spec.decrypt is not None
    if spec.decrypt.on_error == "dlq" and spec.decrypt.dlq_topic:
        ensure_topic(spec.kafka, spec.decrypt.dlq_topic)
    plan = DecryptPlan(
        decrypt=spec.decrypt,
        event_id_column=spec.event_id_column,
        producer=producer_config(spec.kafka),
        headers=[(name, value.encode()) for name, value in provenance_headers(spec).items()],
    )
    return partial(_run, plan, body, dlq_total)


def _run(
    plan: DecryptPlan, body: ArrowMapFunction, dlq_total: Accumulator[int], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    yield from body(decrypted_batches(plan, batches, dlq_total))


class DeadLetters:
    """This task's DLQ producer, made on the first bad row; counts what the broker confirmed."""

    def __init__(self, plan: DecryptPlan) -> None:
        self._plan = plan
        self._topic = plan.decrypt.dlq_topic or ""
        self._producer: Producer | None = None
        self.counter = DeliveryCounter(self._topic)

    def send(self, key: bytes | None, value: bytes, error: DecryptError) -> None:
        if self._producer is None:
            self._producer = Producer({**self._plan.producer, "on_delivery": self.counter})
        headers: list[Header] = [
            *self._plan.headers,
            ("replay-error", str(error).encode()),
            ("replay-event-id", (error.event_id or "").encode()),
            ("replay-column", (error.column or "").encode()),
        ]
        while True:
            try:
                self._producer.produce(self._topic, value, key, headers=headers)
                break
            except BufferError:
                self._producer.poll(0.1)
        self._producer.poll(0)

    def finish(self) -> int:
        """Wait for every DLQ record's report; a refused one fails the task like a target record."""
        if self._producer is not None:
            self._producer.flush(DLQ_FLUSH_S)
            if len(self._producer):
                raise PublishError(
                    f"{len(self._producer)} record(s) to DLQ topic '{self._topic}' unconfirmed"
                )
        self.counter.raise_if_failed()
        return self.counter.confirmed


def decrypted_batches(
    plan: DecryptPlan, batches: Iterator[pa.RecordBatch], dlq_total: Accumulator[int] | None
) -> Iterator[pa.RecordBatch]:
    """(key, value) batches with declared columns in plaintext; bad rows dead-lettered or fatal."""
    resolve = KeyResolver(plan.decrypt.data_keys, plan.decrypt.kms, plan.decrypt.local_key_dir)
    dead = DeadLetters(plan)
    for batch in batches:
        keys: list[Any] = batch.column(0).to_pylist()
        values: list[Any] = batch.column(1).to_pylist()
        kept_keys: list[Any] = []
        kept_values: list[bytes] = []
        for key, value in zip(keys, values, strict=True):
            try:
                kept_values.append(decrypt_row(value, plan, resolve))
            except DecryptError as error:
                if plan.decrypt.on_error != "dlq":
                    raise
                dead.send(key, value, error)
                continue
            kept_keys.append(key)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(kept_keys, batch.schema.field(0).type),
                pa.array(kept_values, batch.schema.field(1).type),
            ],
            schema=batch.schema,
        )
    confirmed = dead.finish()
    if dlq_total is not None and confirmed:
        dlq_total.add(confirmed)


def decrypt_row(value: bytes, plan: DecryptPlan, resolve: KeyResolver) -> bytes:
    """The row JSON with each declared column's token replaced by its plaintext, in place."""
    row = json.loads(value)
    event_id = row.get(plan.event_id_column)
    event = None if event_id is None else str(event_id)
    text = value.decode("utf-8")
    for column in plan.decrypt.columns:
        token = row.get(column)
        if token is None:
            continue  # null (to_json leaves the field out): nothing to decrypt
        if not isinstance(token, str):
            raise DecryptError(
                "not an encrypted value (expected a base64 string)", column=column, event_id=event
            )
        try:
            plain = decrypt_value(token, resolve)
        except DecryptError as error:
            raise error.at(column, event) from None
        text = _splice(text, column, token, plain, event)
    return text.encode("utf-8")


def _splice(text: str, column: str, token: str, plain: str, event: str | None) -> str:
    """Replace ``"column":"token"`` by ``"column":"plain"`` (Spark writes compact JSON)."""
    needle = f"{json.dumps(column, ensure_ascii=False)}:{json.dumps(token)}"
    if text.count(needle) != 1:
        raise DecryptError("value not found in the row's JSON", column=column, event_id=event)
    return text.replace(
        needle, f"{json.dumps(column, ensure_ascii=False)}:{json.dumps(plain, ensure_ascii=False)}"
    )
