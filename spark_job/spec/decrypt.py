"""The spec's optional ``decrypt`` section: which columns to decrypt, with which data keys, and how.

Shape (defaults shown)::

    "decrypt": {
      "columns": ["email"],                       # decrypted before publishing; others untouched
      "data_keys": {"dk-1a2b": {"encrypted": "<base64>", "key_ref": "local:dev"}},
                                                  # from the table's _keys.json, see spark_job.pii.keys
      "kms": {"region": null, "endpoint_url": null},
      "local_key_dir": null                       # required when a key_ref is local:<name>
    }

What an undecryptable row does is the run's ``on_error`` (the spec's top level), as for any bad record.

The section's shape and rules only (``spark_job.spec.model`` holds it as one field and calls
``validate_decrypt``); ``spark_job.spec.parse`` reads it from the document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from spark_job.errors import SpecError

LOCAL_PREFIX = "local:"
KMS_PREFIX = "kms:"
KMS_ARN_PREFIX = "arn:aws:kms:"
_LOCAL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True)
class DataKeyRef:
    encrypted: str  # base64 of the data key as the KMS (or local key) encrypted it
    key_ref: str  # which key encrypted it: local:<name>, kms:<key id or alias> or a KMS key ARN


@dataclass(frozen=True)
class KmsSettings:
    region: str | None = None
    endpoint_url: str | None = None


@dataclass(frozen=True)
class Decrypt:
    columns: tuple[str, ...]
    data_keys: dict[str, DataKeyRef]
    kms: KmsSettings = field(default_factory=KmsSettings)
    local_key_dir: str | None = None


def is_local(key_ref: str) -> bool:
    return key_ref.startswith(LOCAL_PREFIX)


def is_kms(key_ref: str) -> bool:
    return key_ref.startswith((KMS_PREFIX, KMS_ARN_PREFIX))


def local_name(key_ref: str) -> str:
    """The key file's name of a ``local:<name>`` ref; refuses names that could leave the key dir."""
    name = key_ref.removeprefix(LOCAL_PREFIX)
    if not _LOCAL_NAME.match(name):
        raise SpecError(
            "decrypt.data_keys.key_ref", f"'{key_ref}' is not local:<name> (letters, digits, _.-)"
        )
    return name


def validate_decrypt(decrypt: Decrypt, *, value_format: str, protected: tuple[str, ...]) -> None:
    """``protected``: key and event id columns, which must stay readable for keys and reasons."""
    if not decrypt.columns:
        raise SpecError("decrypt.columns", "must name at least one column")
    for column in decrypt.columns:
        if not isinstance(column, str) or not column:
            raise SpecError("decrypt.columns", "must be non-empty strings")
        if column in protected:
            raise SpecError(
                "decrypt.columns", f"'{column}' is the key or event id column: it cannot be decrypted"
            )
    if value_format != "json":
        raise SpecError("decrypt", "needs value_format 'json' (the row as JSON)")
    if not decrypt.data_keys:
        raise SpecError("decrypt.data_keys", "must hold at least one data key")
    for key_id, ref in decrypt.data_keys.items():
        if is_local(ref.key_ref):
            local_name(ref.key_ref)
            if not decrypt.local_key_dir:
                raise SpecError("decrypt.local_key_dir", f"is required: data key '{key_id}' uses a local key")
        elif not is_kms(ref.key_ref):
            raise SpecError(
                f"decrypt.data_keys.{key_id}.key_ref", "must be local:<name>, kms:<id> or a KMS ARN"
            )
