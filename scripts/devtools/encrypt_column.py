"""Encrypt one column of an existing Parquet table in place, under a new data key (onboarding, tests).

``scripts/encrypt-column --table DIR --column email --key-ref local:dev --local-key-dir KEYS`` or
``--key-ref kms:<key id> [--kms-region R] [--kms-endpoint-url URL]``. Every non-null string value of
the column, in every ``*.parquet`` file under the table, becomes an ``spark_job.pii.envelope`` token
under one fresh data key; the data key, wrapped by the given key, is added to ``<table>/_keys.json``
(Spark skips ``_``-files when reading the table). A missing local key file is created. Local
tables only: it rewrites files with pyarrow. Running it twice encrypts twice, so it refuses a
column that already holds tokens of a data key listed in the manifest.
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from spark_job.pii.envelope import DecryptError, encrypt_value, new_data_key, token_key_id
from spark_job.pii.keys import ensure_local_key, kms_client, kms_key_id, wrap_local
from spark_job.spec.decrypt import DataKeyRef, KmsSettings, is_kms, is_local

MANIFEST = "_keys.json"


def wrap_data_key(
    data_key: bytes, key_id: str, key_ref: str, *, local_key_dir: Path | None, kms: KmsSettings
) -> DataKeyRef:
    """The manifest entry of a data key: wrapped by the local key or by KMS ``Encrypt``."""
    if is_local(key_ref):
        if local_key_dir is None:
            raise ValueError("a local:<name> key needs --local-key-dir")
        return DataKeyRef(wrap_local(data_key, key_id, ensure_local_key(local_key_dir, key_ref)), key_ref)
    if not is_kms(key_ref):
        raise ValueError(f"key ref must be local:<name>, kms:<id> or a KMS ARN, got {key_ref!r}")
    answer = kms_client(kms).encrypt(KeyId=kms_key_id(key_ref), Plaintext=data_key)
    return DataKeyRef(base64.b64encode(answer["CiphertextBlob"]).decode("ascii"), key_ref)


def read_manifest(table: Path) -> dict[str, dict[str, str]]:
    path = table / MANIFEST
    return json.loads(path.read_text()) if path.exists() else {}


def add_to_manifest(table: Path, key_id: str, ref: DataKeyRef) -> None:
    manifest = read_manifest(table)
    manifest[key_id] = asdict(ref)
    (table / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _already_encrypted(values: list[str | None], known: set[str]) -> bool:
    for value in values:
        if value is None:
            continue
        try:
            key_id, _ = token_key_id(base64.b64decode(value, validate=True))
        except (DecryptError, ValueError):
            return False
        return key_id in known
    return False


def check_column(table: Path, column: str) -> list[Path]:
    """The table's files, once every one holds ``column`` as plain strings (nothing is written before)."""
    known = set(read_manifest(table))
    files = sorted(table.rglob("*.parquet"))
    if not files:
        raise ValueError(f"no Parquet files under {table}")
    for path in files:
        schema = pq.read_schema(path)
        if column not in schema.names or not pa.types.is_string(schema.field(column).type):
            raise ValueError(f"{path.name}: no string column '{column}'")
        if _already_encrypted(pq.read_table(path, columns=[column]).column(column).to_pylist(), known):
            raise ValueError(f"column '{column}' of {path.name} is already encrypted")
    return files


def encrypt_column(files: list[Path], column: str, data_key: bytes, key_id: str) -> int:
    """Encrypt ``column`` in each file, in place; returns the values encrypted."""
    count = 0
    for path in files:
        data = pq.read_table(path)
        values: list[str | None] = data.column(column).to_pylist()
        tokens = [None if value is None else encrypt_value(value, data_key, key_id) for value in values]
        count += sum(token is not None for token in tokens)
        index = data.column_names.index(column)
        data = data.set_column(index, data.schema.field(column), pa.array(tokens, pa.string()))
        pq.write_table(data, path, compression="snappy")
    return count


def encrypt_table(
    table: Path,
    column: str,
    key_ref: str,
    *,
    local_key_dir: Path | None = None,
    kms: KmsSettings | None = None,
) -> tuple[str, int]:
    """New data key, column encrypted, manifest updated; returns (data key id, values encrypted).

    The manifest gets the wrapped key before any file is rewritten: a run stopped halfway leaves
    files that still decrypt, never tokens whose data key is lost.
    """
    files = check_column(table, column)
    key_id = f"dk-{secrets.token_hex(6)}"
    data_key = new_data_key()
    ref = wrap_data_key(data_key, key_id, key_ref, local_key_dir=local_key_dir, kms=kms or KmsSettings())
    add_to_manifest(table, key_id, ref)
    return key_id, encrypt_column(files, column, data_key, key_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--table", type=Path, required=True, help="table directory (hive-partitioned Parquet)"
    )
    parser.add_argument("--column", required=True, help="string column to encrypt")
    parser.add_argument("--key-ref", required=True, help="local:<name>, kms:<key id> or a KMS key ARN")
    parser.add_argument("--local-key-dir", type=Path, help="where local:<name> keys live (<name>.key)")
    parser.add_argument("--kms-region", help="KMS region (default: boto3's)")
    parser.add_argument("--kms-endpoint-url", help="KMS endpoint override (tests: moto)")
    args = parser.parse_args(argv)
    kms = KmsSettings(region=args.kms_region, endpoint_url=args.kms_endpoint_url)
    try:
        key_id, count = encrypt_table(
            args.table, args.column, args.key_ref, local_key_dir=args.local_key_dir, kms=kms
        )
    except ValueError as exc:
        parser.error(str(exc))
    print(f"encrypted {count} values of column {args.column} with data key {key_id} ({args.key_ref})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
