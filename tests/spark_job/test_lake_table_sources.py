"""What a source declares beyond its rows reads the same from Iceberg and Delta as from Parquet.

Encrypted columns decrypt on the executors, and a value that fails to decrypt is dead-lettered as
read (its token untouched) while the rest publish; a bronze table's key, value, headers and timestamps
go out byte for byte. Each on a day-partitioned table of each format (`tests.fixtures.lake_writes`),
read by a real `spark-submit` with the release's runtimes.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from scripts.devtools.sample_pii import email_of
from scripts.devtools.sample_table import write_sample_table
from tests.fixtures.bronze import (
    IN_WINDOW,
    as_record,
    land_bronze,
    original_records,
    produce,
    raw_document,
)
from tests.fixtures.kafka import (
    KEEP_FOREVER,
    consume_all,
    create_topic,
    headers_of,
    unique_topic,
    value_of,
)
from tests.fixtures.lake_writes import LAKE_FORMATS, as_lake_table
from tests.fixtures.spark import SAMPLE_START, job_spec, spark_submit, write_spec

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

WINDOW = ("2024-01-02", "2024-01-04")  # job_spec's default window
BROKEN = 3  # values made undecryptable, one per day of the window


def _encrypted_rows(root: Path) -> tuple[pa.Table, Path, dict[str, Any], dict[str, str]]:
    """The sample with ``email`` encrypted under ``local:sample``, one value per window day broken:
    (rows, key dir, the table's data keys, {event id: broken token})."""
    parquet, keys = root / "orders", root / "keys"
    write_sample_table(parquet, SAMPLE_START, 4, 40, seed=7, encrypted_email_key_dir=keys)
    rows = ds.dataset(parquet, format="parquet", partitioning="hive").to_table()
    emails, days, ids = (rows.column(name).to_pylist() for name in ("email", "dt", "event_id"))
    broken: dict[str, str] = {}
    for day in WINDOW[0], "2024-01-03", WINDOW[1]:
        index = days.index(day) + 5
        token = bytearray(base64.b64decode(emails[index]))
        token[-1] ^= 0x01  # the tag no longer matches: authentication fails
        emails[index] = base64.b64encode(bytes(token)).decode()
        broken[ids[index]] = emails[index]
    rows = rows.set_column(rows.column_names.index("email"), "email", pa.array(emails, pa.string()))
    return rows, keys, json.loads((parquet / "_keys.json").read_text()), broken


@pytest.mark.parametrize("table_format", LAKE_FORMATS)
def test_encrypted_columns_of_a_lake_table_decrypt_and_what_does_not_is_dead_lettered(
    tmp_path: Path, kafka_bootstrap: str, lake_jars: list[Path], table_format: str
) -> None:
    rows, keys, data_keys, broken = _encrypted_rows(tmp_path / "source")
    path = as_lake_table(rows, tmp_path / "lake", table_format)
    in_window = {row["event_id"]: row for row in rows.to_pylist() if WINDOW[0] <= row["dt"] <= WINDOW[1]}
    topic, dlq_topic = unique_topic(f"pii-{table_format}"), unique_topic(f"pii-dlq-{table_format}")
    create_topic(kafka_bootstrap, topic, partitions=2)
    document = job_spec(
        Path(path),
        kafka_bootstrap,
        topic,
        source={"name": "orders", "path": path, "format": table_format},
        decrypt={"columns": ["email"], "data_keys": data_keys, "local_key_dir": str(keys)},
        on_error="dlq",
        dlq_topic=dlq_topic,
    )

    run = spark_submit(write_spec(tmp_path, document), jars=lake_jars)

    assert run.kind == "REPLAY_RESULT", run.stderr[-3000:]
    result = run.document
    assert (result["rows_selected"], result["dead_lettered"]) == (len(in_window), BROKEN)
    assert result["confirmed"] == len(in_window) - BROKEN
    good = [
        json.loads(value_of(m)) for m in consume_all(kafka_bootstrap, topic, expected=result["confirmed"])
    ]
    assert sorted(value["event_id"] for value in good) == sorted(set(in_window) - set(broken))
    for value in good:
        assert value["email"] == email_of(in_window[value["event_id"]]["customer_id"])  # plaintext
    parked = consume_all(kafka_bootstrap, dlq_topic, expected=BROKEN)
    assert len(parked) == BROKEN
    for message in parked:
        event_id = headers_of(message)["replay-event-id"].decode()
        assert json.loads(value_of(message))["email"] == broken[event_id]  # as read, never decrypted
        assert "column 'email'" in headers_of(message)["replay-error"].decode()
    assert not any(token in run.stdout + run.stderr for token in broken.values())


@pytest.mark.parametrize("table_format", LAKE_FORMATS)
def test_a_bronze_lake_table_is_replayed_byte_for_byte(
    tmp_path: Path, kafka_bootstrap: str, lake_jars: list[Path], table_format: str
) -> None:
    """Key, value, headers (the originals in order, then the provenance) and timestamps as the
    producer sent them, from the bronze table landed in ``table_format``."""
    source = unique_topic(f"bronze-{table_format}")
    create_topic(kafka_bootstrap, source, partitions=3, config=KEEP_FOREVER)
    records = original_records()
    produce(kafka_bootstrap, source, records)
    landed = land_bronze(consume_all(kafka_bootstrap, source, expected=len(records)), tmp_path / "bronze")
    bronze = ds.dataset(landed, format="parquet", partitioning="hive").to_table()
    path = as_lake_table(bronze, tmp_path / "lake", table_format)
    topic = unique_topic(f"bronze-replay-{table_format}")
    create_topic(kafka_bootstrap, topic, partitions=3, config=KEEP_FOREVER)
    document = raw_document(
        Path(path),
        kafka_bootstrap,
        topic,
        source={"name": "bronze", "path": path, "format": table_format},
        timestamp="event",
    )

    run = spark_submit(write_spec(tmp_path, document), jars=lake_jars)

    assert run.kind == "REPLAY_RESULT", run.stderr[-3000:]
    assert run.document["confirmed"] == IN_WINDOW
    replayed = [as_record(message) for message in consume_all(kafka_bootstrap, topic, expected=IN_WINDOW)]
    originals = {value: (key, headers, stamp) for key, value, headers, stamp in records[:IN_WINDOW]}
    assert sorted(value for _, value, _, _ in replayed) == sorted(originals)
    for key, value, headers, stamp in replayed:
        original_key, original_headers, original_stamp = originals[value]
        assert (key, stamp) == (original_key, original_stamp)
        assert headers[: len(original_headers)] == original_headers
        assert [name for name, _ in headers[len(original_headers) :]][:1] == ["team"]  # then provenance
