"""PII envelope format, data key resolution, the spec's decrypt section and the daemon's part of it.

Everything here runs without Spark; KMS is the session's moto server (through a counting proxy).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.config.settings import load_settings
from daemon.usecases.catalog import Source as CatalogSource
from daemon.usecases.catalog import TableFormat
from daemon.usecases.pii import KeyManifestError, decrypt_section, table_root
from scripts.devtools.encrypt_column import encrypt_table
from scripts.devtools.sample_pii import email_of
from scripts.devtools.sample_table import write_sample_table
from spark_job.errors import SpecError
from spark_job.pii.envelope import DecryptError, Resolver, decrypt_value, encrypt_value, new_data_key
from spark_job.pii.keys import DataKeyCache, KeyResolver
from spark_job.spec.decrypt import DataKeyRef, KmsSettings
from spark_job.spec.parse import spec_from_dict, spec_from_json
from tests.fixtures.aws import REGION, AwsClients
from tests.fixtures.counting_proxy import CountingProxy, counting_proxy

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
KEY_ID = "dk-test"
plaintexts = st.text(min_size=1, max_size=200).map(lambda text: f"pii<{text}>")


@pytest.fixture
def kms_proxy(moto_server: str) -> Iterator[CountingProxy]:
    """KMS through a proxy that counts calls (moto keeps no request history)."""
    with counting_proxy(moto_server) as proxy:
        yield proxy


def resolver(key: bytes = KEY) -> Resolver:
    return {KEY_ID: key}.__getitem__


def always(key: bytes) -> Resolver:
    """A resolver that answers every key id with ``key``."""
    return lambda _id: key


def assert_discreet(error: DecryptError, plaintext: str, token: str) -> None:
    message = str(error)
    assert plaintext not in message
    assert token not in message
    # no chained exception whose text could quote either
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


# --- the format ----------------------------------------------------------------------------------


@given(plaintexts)
def test_round_trip(plaintext: str) -> None:
    token = encrypt_value(plaintext, KEY, KEY_ID)
    assert decrypt_value(token, resolver()) == plaintext


def test_layout_is_the_documented_one() -> None:
    raw = base64.b64decode(encrypt_value("customer-00042@example.com", KEY, KEY_ID))
    assert raw[0] == 0x01
    assert raw[1] == len(KEY_ID)
    assert raw[2 : 2 + len(KEY_ID)] == KEY_ID.encode()
    assert len(raw) == 2 + len(KEY_ID) + 12 + len("customer-00042@example.com") + 16


@settings(max_examples=300)
@given(plaintexts, st.data())
def test_any_bit_flip_is_refused(plaintext: str, data: st.DataObject) -> None:
    raw = bytearray(base64.b64decode(encrypt_value(plaintext, KEY, KEY_ID)))
    index = data.draw(st.integers(0, len(raw) - 1), label="byte")
    raw[index] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    token = base64.b64encode(bytes(raw)).decode()
    with pytest.raises(DecryptError) as caught:
        decrypt_value(token, resolver())
    assert_discreet(caught.value, plaintext, token)


@given(plaintexts)
def test_wrong_key_is_refused(plaintext: str) -> None:
    token = encrypt_value(plaintext, KEY, KEY_ID)
    with pytest.raises(DecryptError, match="authentication failed") as caught:
        decrypt_value(token, resolver(OTHER_KEY))
    assert_discreet(caught.value, plaintext, token)


@given(plaintexts, st.sampled_from(["column", "unknown-key", "not-base64", "truncated"]))
def test_every_refusal_is_discreet(plaintext: str, case: str) -> None:
    token = encrypt_value(plaintext, KEY, KEY_ID)
    broken = {
        "column": token,
        "unknown-key": encrypt_value(plaintext, KEY, "dk-other"),
        "not-base64": token[:-4] + "!!!!",
        "truncated": token[:12],
    }[case]
    with pytest.raises(DecryptError) as caught:
        decrypt_value(broken, resolver(OTHER_KEY if case == "column" else KEY))
    error = caught.value.at("email", "evt-20240102-000007") if case == "column" else caught.value
    assert_discreet(error, plaintext, broken)
    if case == "column":
        assert str(error).startswith("cannot decrypt column 'email' of event 'evt-20240102-000007': ")


# --- keys ----------------------------------------------------------------------------------------


def test_local_keys_unwrap_once_per_process(tmp_path: Path) -> None:
    table = tmp_path / "orders"
    write_sample_table(table, date(2024, 1, 1), 1, 5, encrypted_email_key_dir=tmp_path / "keys")
    manifest = json.loads((table / "_keys.json").read_text())
    ((key_id, entry),) = manifest.items()
    assert entry["key_ref"] == "local:sample" and (tmp_path / "keys" / "sample.key").stat().st_size == 32
    rows = pq.read_table(table / "dt=2024-01-01" / "part-0.parquet").to_pylist()
    cache = DataKeyCache()
    resolve = KeyResolver({key_id: DataKeyRef(**entry)}, KmsSettings(), str(tmp_path / "keys"))
    for row in rows:
        key = cache.get(key_id, DataKeyRef(**entry), kms=KmsSettings(), local_key_dir=str(tmp_path / "keys"))
        assert decrypt_value(row["email"], always(key)) == email_of(row["customer_id"])
        assert decrypt_value(row["email"], resolve) == email_of(row["customer_id"])
    assert cache.unwrapped == 1


def test_a_wrong_local_key_is_a_discreet_error(tmp_path: Path) -> None:
    table = tmp_path / "orders"
    write_sample_table(table, date(2024, 1, 1), 1, 3, encrypted_email_key_dir=tmp_path / "keys")
    ((key_id, entry),) = json.loads((table / "_keys.json").read_text()).items()
    (tmp_path / "keys" / "sample.key").write_bytes(OTHER_KEY)
    resolve = KeyResolver({key_id: DataKeyRef(**entry)}, KmsSettings(), str(tmp_path / "keys"))
    token = pq.read_table(table).column("email")[0].as_py()
    with pytest.raises(DecryptError, match="does not open with its local key") as caught:
        decrypt_value(token, resolve)
    assert entry["encrypted"] not in str(caught.value) and token not in str(caught.value)


def test_kms_data_key_is_decrypted_once_per_cache(
    tmp_path: Path, aws: AwsClients, kms_proxy: CountingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    kms_key = aws.kms.create_key(Description="replay pii")["KeyMetadata"]["KeyId"]
    table = tmp_path / "orders"
    write_sample_table(table, date(2024, 1, 1), 1, 20)
    from scripts.devtools.sample_pii import add_email_column

    add_email_column(table)
    key_id, count = encrypt_table(
        table, "email", f"kms:{kms_key}", kms=KmsSettings(region=REGION, endpoint_url=aws.endpoint_url)
    )
    assert count == 20
    ref = DataKeyRef(**json.loads((table / "_keys.json").read_text())[key_id])
    cache = DataKeyCache()
    through_proxy = KmsSettings(region=REGION, endpoint_url=kms_proxy.url)
    rows = pq.read_table(table).to_pylist()
    for row in rows:
        key = cache.get(key_id, ref, kms=through_proxy, local_key_dir=None)
        assert decrypt_value(row["email"], always(key)) == email_of(row["customer_id"])
    assert kms_proxy.calls("TrentService.Decrypt") == 1


def test_a_refused_kms_key_is_asked_once_and_names_the_code(
    aws: AwsClients, kms_proxy: CountingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    ref = DataKeyRef(encrypted=base64.b64encode(b"x" * 64).decode(), key_ref="kms:alias/none")
    cache = DataKeyCache()
    kms = KmsSettings(region=REGION, endpoint_url=kms_proxy.url)
    for _ in range(5):
        with pytest.raises(DecryptError, match="KMS refused data key 'dk-1'"):
            cache.get("dk-1", ref, kms=kms, local_key_dir=None)
    assert kms_proxy.calls("TrentService.Decrypt") == 1


# --- the spec ------------------------------------------------------------------------------------


def spec_document(**decrypt: Any) -> dict[str, Any]:
    section: dict[str, Any] = {
        "columns": ["email"],
        "data_keys": {"dk-1": {"encrypted": "AAAA", "key_ref": "local:dev"}},
        "local_key_dir": "keys",
    }
    section.update(decrypt)
    return {
        "run_id": "r-1",
        "source": {"name": "orders", "path": "lake/orders"},
        "window": {"column": "dt", "start_day": "2024-01-01", "end_day": "2024-01-02"},
        "topic": "t",
        "kafka": {"bootstrap.servers": "b:9092"},
        "tps": 0,
        "key_column": "order_id",
        "event_id_column": "event_id",
        "event_time_column": "updated_at",
        "decrypt": section,
    }


def test_decrypt_section_round_trips() -> None:
    document = spec_document(kms={"region": "eu-west-1", "endpoint_url": None})
    spec = spec_from_dict({**document, "on_error": "dlq", "dlq_topic": "t.dlq"})
    assert spec.decrypt is not None and spec.decrypt.columns == ("email",)
    assert (spec.on_error, spec.dlq_topic) == ("dlq", "t.dlq")  # the run's, for every bad record
    assert spec_from_json(spec.to_json()) == spec
    without = spec_from_dict({k: v for k, v in spec_document().items() if k != "decrypt"})
    assert "decrypt" not in without.to_dict()


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"columns": []}, "decrypt.columns"),
        ({"on_error": "dlq"}, "decrypt.on_error"),  # the run's choice now, at the spec's top level
        ({"dlq_topic": "t.dlq"}, "decrypt.dlq_topic"),
        ({"local_key_dir": None}, "decrypt.local_key_dir"),
        ({"columns": ["event_id"]}, "decrypt.columns"),
        ({"data_keys": {}}, "decrypt.data_keys"),
        ({"data_keys": {"k": {"encrypted": "AA", "key_ref": "vault:x"}}}, "decrypt.data_keys.k.key_ref"),
        ({"data_keys": {"k": {"encrypted": "AA", "key_ref": "local:../x"}}}, "decrypt.data_keys.key_ref"),
        ({"colums": ["email"]}, "decrypt.colums"),
    ],
)
def test_decrypt_section_is_validated(override: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_dict(spec_document(**override))
    assert caught.value.field == field


# --- the daemon ----------------------------------------------------------------------------------


def catalog_source(table: Path, **columns: str) -> CatalogSource:
    return CatalogSource.model_validate(
        {
            "name": "orders",
            "table": {"path": str(table)},
            "partition_column": "dt",
            "event_time_column": "updated_at",
            "key_column": "order_id",
            "event_id_column": "event_id",
            "encrypted_columns": {name: {"key_ref": ref} for name, ref in columns.items()},
            "owners": ["U024BE7LH"],
        }
    )


def test_daemon_reads_the_key_manifest(tmp_path: Path) -> None:
    table = tmp_path / "orders"
    write_sample_table(table, date(2024, 1, 1), 1, 3, encrypted_email_key_dir=tmp_path / "keys")
    manifest = json.loads((table / "_keys.json").read_text())
    manifest["dk-foreign"] = {"encrypted": "AAAA", "key_ref": "kms:someone-else"}
    (table / "_keys.json").write_text(json.dumps(manifest))
    settings = load_settings({}, local_key_dir=tmp_path / "keys")
    section = decrypt_section(catalog_source(table, email="local:sample"), settings)
    assert section is not None
    assert section.columns == ("email",)
    assert set(section.data_keys) == set(manifest) - {"dk-foreign"}  # only keys the catalog names
    assert section.local_key_dir == str(tmp_path / "keys")
    assert (section.kms.region, section.kms.endpoint_url) == (settings.emr.region, settings.emr.endpoint_url)
    assert decrypt_section(catalog_source(table), settings) is None
    with pytest.raises(KeyManifestError, match=r"_keys\.json"):
        decrypt_section(catalog_source(tmp_path / "nowhere", email="local:sample"), settings)


def test_new_data_keys_are_random() -> None:
    assert new_data_key() != new_data_key() and len(new_data_key()) == 32


def test_build_spec_carries_the_decrypt_section(tmp_path: Path) -> None:
    from daemon.usecases.catalog import Catalog
    from daemon.usecases.job_specs import build_spec
    from tests.fixtures.store_rows import unsaved_day_run

    table = tmp_path / "orders"
    write_sample_table(table, date(2024, 1, 1), 1, 3, encrypted_email_key_dir=tmp_path / "keys")
    catalog = Catalog(path="sources.yaml", sources={"orders": catalog_source(table, email="local:sample")})
    run = unsaved_day_run(on_error="dlq", dlq_topic="replay.dlq.orders")
    settings = load_settings({"REPLAY_LOCAL_KEY_DIR": str(tmp_path / "keys")})
    spec = build_spec(run, catalog=catalog, settings=settings, result_uri=None)
    assert spec.decrypt is not None
    assert (spec.on_error, spec.dlq_topic) == ("dlq", "replay.dlq.orders")
    assert spec_from_json(spec.to_json()) == spec


@pytest.mark.parametrize(
    ("where", "root"),
    [
        ("s3://lake/sales/orders", "s3://lake/sales/orders"),
        ("s3://lake/sales/orders/", "s3://lake/sales/orders/"),
        ("s3://wh/sales.db/orders/metadata/00003-5f1c.metadata.json", "s3://wh/sales.db/orders"),
        ("/wh/sales/orders/metadata/v7.metadata.json", "/wh/sales/orders"),
        ("/data/orders/v7.metadata.json", "/data/orders/v7.metadata.json"),  # not Iceberg's layout
    ],
)
def test_a_tables_root_is_its_folder_or_the_one_above_its_iceberg_metadata(where: str, root: str) -> None:
    assert table_root(where) == root


@pytest.mark.parametrize("table_format", ["delta", "iceberg"])
def test_a_named_tables_keys_are_read_at_the_location_its_plan_recorded(
    tmp_path: Path, table_format: TableFormat
) -> None:
    """A table named in a catalog keeps `_keys.json` in its root, as a table at a path does: the
    daemon reads it where the run's plan recorded the table, the job never asks the catalog."""
    from daemon.usecases.catalog import Catalog, TableRef
    from daemon.usecases.job_specs import build_spec
    from tests.fixtures.store_rows import unsaved_day_run

    table = tmp_path / "orders"
    write_sample_table(table, date(2024, 1, 1), 1, 3, encrypted_email_key_dir=tmp_path / "keys")
    named = catalog_source(table, email="local:sample").model_copy(
        update={"table": TableRef(table="glue.sales.orders", format=table_format)}
    )
    recorded = str(table / "metadata" / "00002-ab.metadata.json") if table_format == "iceberg" else str(table)
    run = unsaved_day_run(snapshot="3", table_metadata=recorded)
    settings = load_settings({"REPLAY_LOCAL_KEY_DIR": str(tmp_path / "keys")})

    spec = build_spec(
        run,
        catalog=Catalog(path="sources.yaml", sources={"orders": named}),
        settings=settings,
        result_uri=None,
    )

    assert spec.decrypt is not None and spec.source.path == recorded
    assert set(spec.decrypt.data_keys) == set(json.loads((table / "_keys.json").read_text()))
    with pytest.raises(KeyManifestError, match=r"no recorded location .*replay the window again"):
        decrypt_section(named, settings)
