"""Decrypting PII columns in the real job: what lands on the broker, how often KMS is asked, failures.

Five ``spark-submit`` runs on small windows: local-key round trip, KMS (moto behind a counting
proxy), a corrupted value with ``on_error=fail``, the same with ``on_error=dlq``, and records that
decrypt but are too large for their topic (dead-lettered as read, never as plaintext).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from scripts.devtools.encrypt_column import encrypt_table
from scripts.devtools.sample_pii import add_email_column, email_of
from scripts.devtools.sample_table import write_sample_table
from spark_job.spec.decrypt import KmsSettings
from tests.fixtures.aws import REGION, AwsClients
from tests.fixtures.counting_proxy import CountingProxy, counting_proxy
from tests.fixtures.kafka import (
    consume_all,
    create_topic,
    headers_of,
    key_of,
    topic_config,
    unique_topic,
    value_of,
)
from tests.fixtures.spark import SAMPLE_START, job_spec, spark_submit, write_spec

DAYS = 4
ROWS_PER_DAY = 60
WINDOW_DAYS = ("2024-01-02", "2024-01-04")  # job_spec's default window: 3 days
SLOTS = 2  # tests.fixtures.spark.TEST_MASTER


@pytest.fixture
def kms_proxy(moto_server: str) -> Iterator[CountingProxy]:
    """KMS through a proxy that counts calls (moto keeps no request history)."""
    with counting_proxy(moto_server) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def encrypted_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(table, key dir): the sample table with an ``email`` column encrypted under ``local:sample``."""
    root = tmp_path_factory.mktemp("pii")
    table, keys = root / "orders", root / "keys"
    write_sample_table(table, SAMPLE_START, DAYS, ROWS_PER_DAY, seed=7, encrypted_email_key_dir=keys)
    return table, keys


def window_rows(table: Path) -> dict[str, dict[str, Any]]:
    """The source rows of the window by event id (as the table holds them, email encrypted)."""
    dataset = ds.dataset(table, format="parquet", partitioning="hive")
    rows = dataset.to_table(filter=(ds.field("dt") >= WINDOW_DAYS[0]) & (ds.field("dt") <= WINDOW_DAYS[1]))
    return {row["event_id"]: row for row in rows.to_pylist()}


def decrypt_section(table: Path, keys: Path | None, **extra: Any) -> dict[str, Any]:
    return {
        "columns": ["email"],
        "data_keys": json.loads((table / "_keys.json").read_text()),
        "local_key_dir": str(keys) if keys else None,
        **extra,
    }


def corrupt(table: Path, into: Path, count: int) -> dict[str, str]:
    """Copy the table, flipping one tag bit of ``count`` emails in the window; {event id: bad token}."""
    shutil.copytree(table, into)
    broken: dict[str, str] = {}
    for day in ("2024-01-02", "2024-01-03", "2024-01-04")[:count]:
        path = into / f"dt={day}" / "part-0.parquet"
        data = pq.read_table(path)
        emails = data.column("email").to_pylist()
        raw = bytearray(base64.b64decode(emails[5]))
        raw[-1] ^= 0x01
        emails[5] = base64.b64encode(bytes(raw)).decode()
        broken[data.column("event_id")[5].as_py()] = emails[5]
        index = data.column_names.index("email")
        pq.write_table(data.set_column(index, "email", pa.array(emails, pa.string())), path)
    return broken


def assert_plaintext_published(values: list[dict[str, Any]], source: dict[str, dict[str, Any]]) -> None:
    for value in values:
        row = source[value["event_id"]]
        assert value["email"] == email_of(row["customer_id"])
        for column in ("order_id", "customer_id", "status", "amount", "currency", "payload"):
            assert value[column] == row[column]  # undeclared columns untouched


def test_round_trip_publishes_plaintext(
    tmp_path: Path, kafka_bootstrap: str, encrypted_table: tuple[Path, Path]
) -> None:
    table, keys = encrypted_table
    topic = unique_topic("pii")
    create_topic(kafka_bootstrap, topic, partitions=2)
    document = job_spec(table, kafka_bootstrap, topic, decrypt=decrypt_section(table, keys))
    run = spark_submit(write_spec(tmp_path, document))
    assert run.kind == "REPLAY_RESULT", run.stderr[-3000:]
    source = window_rows(table)
    assert run.document["confirmed"] == run.document["rows_selected"] == len(source)
    assert run.document["dead_lettered"] == 0
    messages = consume_all(kafka_bootstrap, topic, expected=len(source))
    values = [json.loads(value_of(message)) for message in messages]
    assert sorted(value["event_id"] for value in values) == sorted(source)
    assert_plaintext_published(values, source)
    first = value_of(messages[0]).decode()
    assert list(json.loads(first)) == ["event_id", "order_id", "customer_id", "email", "status", "amount",
                                       "currency", "updated_at", "payload", "dt"]  # fmt: skip


def test_kms_is_asked_once_per_worker_process(
    tmp_path: Path,
    kafka_bootstrap: str,
    aws: AwsClients,
    kms_proxy: CountingProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)  # the job's executors inherit them (dummy moto credentials)
    table = tmp_path / "orders"
    write_sample_table(table, SAMPLE_START, DAYS, ROWS_PER_DAY, seed=7)
    add_email_column(table)
    kms_key = aws.kms.create_key(Description="replay pii")["KeyMetadata"]["Arn"]
    encrypt_table(table, "email", kms_key, kms=KmsSettings(region=REGION, endpoint_url=aws.endpoint_url))
    topic = unique_topic("pii-kms")
    create_topic(kafka_bootstrap, topic, partitions=2)
    section = decrypt_section(table, None, kms={"region": REGION, "endpoint_url": kms_proxy.url})
    run = spark_submit(write_spec(tmp_path, job_spec(table, kafka_bootstrap, topic, decrypt=section)))
    assert run.kind == "REPLAY_RESULT", run.stderr[-3000:]
    rows = run.document["rows_selected"]
    assert run.document["confirmed"] == rows == len(window_rows(table))
    calls = kms_proxy.calls("TrentService.Decrypt")
    # One unwrap per data key per Python worker process (each prints a replay-keys: line with its pid);
    # local[2,2] runs at most 2 workers at once.
    unwraps = re.findall(
        r"^replay-keys: unwrapping data key (\S+) \(kms\) in process (\d+)$", run.stderr, re.M
    )
    assert calls == len(unwraps) == len(set(unwraps))  # never twice for one key in one process
    assert 1 <= calls <= SLOTS * len(section["data_keys"]) < rows
    values = [json.loads(value_of(m)) for m in consume_all(kafka_bootstrap, topic, expected=rows)]
    assert_plaintext_published(values, window_rows(table))


def test_corrupted_value_fails_the_run_discreetly(
    tmp_path: Path, kafka_bootstrap: str, encrypted_table: tuple[Path, Path]
) -> None:
    table, keys = encrypted_table
    broken = corrupt(table, tmp_path / "orders", count=1)
    ((event_id, token),) = broken.items()
    topic = unique_topic("pii-fail")
    create_topic(kafka_bootstrap, topic, partitions=2)
    section = decrypt_section(tmp_path / "orders", keys)
    document = job_spec(tmp_path / "orders", kafka_bootstrap, topic, decrypt=section)
    run = spark_submit(write_spec(tmp_path, document))
    assert run.kind == "REPLAY_FAILED"
    reason = run.document["reason"]
    expected = f"cannot decrypt column 'email' of event '{event_id}': authentication failed"
    assert reason.startswith(expected), reason
    output = run.stdout + run.stderr
    assert token not in output
    assert "@example.com" not in output  # no plaintext, of the bad row or any other
    assert "customer-" not in output


def test_dlq_mode_parks_bad_rows_and_publishes_the_rest(
    tmp_path: Path, kafka_bootstrap: str, encrypted_table: tuple[Path, Path]
) -> None:
    table, keys = encrypted_table
    broken = corrupt(table, tmp_path / "orders", count=3)
    topic, dlq_topic = unique_topic("pii-ok"), unique_topic("pii-dlq")
    create_topic(kafka_bootstrap, topic, partitions=2)
    section = decrypt_section(tmp_path / "orders", keys)
    document = job_spec(
        tmp_path / "orders", kafka_bootstrap, topic, decrypt=section, on_error="dlq", dlq_topic=dlq_topic
    )
    run = spark_submit(write_spec(tmp_path, document))
    assert run.kind == "REPLAY_RESULT", run.stderr[-3000:]
    result = run.document
    assert result["dead_lettered"] == len(broken) == 3
    assert result["confirmed"] + result["dead_lettered"] == result["rows_selected"] == len(window_rows(table))
    good = [
        json.loads(value_of(m)) for m in consume_all(kafka_bootstrap, topic, expected=result["confirmed"])
    ]
    assert not {value["event_id"] for value in good} & set(broken)
    assert_plaintext_published(good, window_rows(table))
    parked = consume_all(kafka_bootstrap, dlq_topic, expected=3)
    assert len(parked) == 3
    for message in parked:
        headers = {name: value.decode() for name, value in headers_of(message).items()}
        value = json.loads(value_of(message))
        event_id = headers["replay-event-id"]
        assert value["event_id"] == event_id and value["email"] == broken[event_id]  # raw row, token as is
        assert "column 'email'" in headers["replay-error"] and event_id in headers["replay-error"]
        assert headers["replay-run-id"] == document["run_id"] and headers["replay-source"] == "orders"
        assert key_of(message).decode() == value["order_id"]
        assert broken[event_id] not in headers["replay-error"]


def test_a_decrypted_record_the_topic_refuses_is_dead_lettered_still_encrypted(
    tmp_path: Path, kafka_bootstrap: str, encrypted_table: tuple[Path, Path]
) -> None:
    """Every record decrypts, then is too large for the target: each dead letter holds the token."""
    table, keys = encrypted_table
    source = window_rows(table)
    topic, dlq_topic = unique_topic("pii-small"), unique_topic("pii-dlq")
    create_topic(kafka_bootstrap, topic, partitions=2, config={"max.message.bytes": "64"})
    create_topic(kafka_bootstrap, dlq_topic, partitions=1)  # as an older version made it: no retention
    retention_ms = 3_600_000
    document = job_spec(
        table,
        kafka_bootstrap,
        topic,
        decrypt=decrypt_section(table, keys),
        on_error="dlq",
        dlq_topic=dlq_topic,
        dlq_retention_ms=retention_ms,
    )
    run = spark_submit(write_spec(tmp_path, document))
    assert run.kind == "REPLAY_RESULT", run.stderr[-3000:]
    assert (run.document["confirmed"], run.document["dead_lettered"]) == (0, len(source))
    parked = consume_all(kafka_bootstrap, dlq_topic, expected=len(source))
    assert len(parked) == len(source)
    for message in parked:
        value = json.loads(value_of(message))
        row = source[value["event_id"]]
        assert value["email"] == row["email"] != email_of(row["customer_id"])  # the token, as read
        assert "@example.com" not in value_of(message).decode()
        assert "MSG_SIZE_TOO_LARGE" in headers_of(message)["replay-error"].decode()
    config = topic_config(kafka_bootstrap, dlq_topic)
    assert config["retention.ms"] == str(retention_ms)
    assert config["message.timestamp.type"] == "LogAppendTime"
