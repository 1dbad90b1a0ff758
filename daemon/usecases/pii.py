"""The job spec's ``decrypt`` section for a source that declares encrypted columns.

The catalog names the columns and the KMS key (``key_ref``) each is encrypted under; the table's
``<table root>/_keys.json`` lists its data keys, each wrapped by such a key. The root is the table's
path, or for a table named in a catalog the location its plan recorded (an Iceberg table's root is
the folder above its ``metadata/`` one), so every format and every way of naming a table keeps its
keys in one place. Data keys wrapped by a
key the catalog does not name for this source are left out, so values under them fail to decrypt
with "unknown data key id" instead of being opened with a key nobody onboarded. The daemon never
unwraps a data key itself: only the job's executors do.
"""

from __future__ import annotations

import json
from typing import Any

from daemon.config.settings import Settings
from daemon.core.errors import ReplayError
from daemon.usecases.catalog import Source
from spark_job.spec.decrypt import DataKeyRef, Decrypt, KmsSettings

KEY_MANIFEST = "_keys.json"


class KeyManifestError(ReplayError):
    """The table's key manifest is missing or unreadable: the run cannot decrypt its PII columns."""


def manifest_uri(table_path: str) -> str:
    return f"{table_path.rstrip('/')}/{KEY_MANIFEST}"


def table_root(where: str) -> str:
    """The folder a table's files are under, from what its reader opens: the table's own folder, or
    an Iceberg metadata file (``<root>/metadata/<version>.metadata.json``)."""
    parent, _, name = where.rstrip("/").rpartition("/")
    if name.endswith(".metadata.json") and parent.endswith("/metadata"):
        return parent.removesuffix("/metadata")
    return where


def read_manifest(table_path: str, settings: Settings) -> dict[str, Any]:
    uri = manifest_uri(table_path)
    try:
        if uri.startswith("s3://"):
            import boto3

            bucket, _, key = uri.removeprefix("s3://").partition("/")
            client = boto3.client("s3", **settings.emr.client_kwargs())
            text = client.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
        else:
            from spark_job.uris import read_text

            text = read_text(uri)
        document = json.loads(text)
    except Exception as exc:  # missing file, S3 error, bad JSON: one clear reason
        raise KeyManifestError(f"cannot read the key manifest {uri}: {type(exc).__name__}") from exc
    if not isinstance(document, dict):
        raise KeyManifestError(f"key manifest {uri} is not a JSON object")
    return document


def decrypt_section(source: Source, settings: Settings, *, read_at: str | None = None) -> Decrypt | None:
    """``None`` for sources without encrypted columns; a row that does not decrypt is a bad record,
    so the run's ``on_error`` decides what it does (``daemon.usecases.dead_letters``). ``read_at``:
    where the run reads a table named in a catalog (its recorded metadata file or location)."""
    if not source.encrypted_columns:
        return None
    where = read_at or source.table.path
    if where is None:
        raise KeyManifestError(
            f"source {source.name}: its table {source.table.location} has no recorded location to find "
            f"{KEY_MANIFEST} at: replay the window again"
        )
    allowed = {column.key_ref for column in source.encrypted_columns.values()}
    data_keys = {
        key_id: DataKeyRef(encrypted=str(entry["encrypted"]), key_ref=str(entry["key_ref"]))
        for key_id, entry in read_manifest(table_root(where), settings).items()
        if isinstance(entry, dict) and entry.get("key_ref") in allowed and entry.get("encrypted")
    }
    return Decrypt(
        columns=tuple(source.encrypted_columns),
        data_keys=data_keys,
        kms=KmsSettings(region=settings.emr.region, endpoint_url=settings.emr.endpoint_url),
        local_key_dir=str(settings.local_key_dir) if settings.local_key_dir else None,
    )
