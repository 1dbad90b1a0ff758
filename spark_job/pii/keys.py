"""Data keys on the executors: unwrap each one once per Python worker process, keep it in memory.

A table's data keys are listed in ``<table>/_keys.json`` as ``{"<key id>": {"encrypted": "<b64>",
"key_ref": "..."}}``; the daemon copies them into the spec. ``key_ref`` says what unwraps one:

* ``kms:<key id or alias>`` or a KMS key ARN: ``kms.decrypt(CiphertextBlob=..., KeyId=...)`` with
  the region / endpoint of the spec's ``decrypt.kms``;
* ``local:<name>`` (development and tests): the 32-byte key in ``<local_key_dir>/<name>.key``;
  the data key is sealed with AES-256-GCM under it as ``nonce (12) | ciphertext | tag (16)``, with
  ``replay-data-key:<key id>`` as associated data (so a wrapped key cannot be relabelled).

Why a process-wide cache: Spark reuses a Python worker process for many tasks, and calling KMS for
every task (or row) would cost a round trip each and can hit KMS request quotas. ``process_cache()``
creates the cache lazily in the worker that first needs it; entries are keyed by (key id, wrapped
key), so a reused worker can never hand one run's data key to another run's different key of the
same id. Failures are cached too: a data key KMS refused is not asked for again per row. Nothing
here logs or formats key material; errors name the key id and the KMS error code only. Each unwrap
prints one ``replay-keys:`` line (key id, how, process id) to the worker's stderr, which Spark
collects in the executor log: it shows how often KMS was asked, and by which process.
"""

from __future__ import annotations

import base64
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from spark_job.pii.envelope import KEY_BYTES, NONCE_BYTES, DecryptError
from spark_job.spec.decrypt import DataKeyRef, KmsSettings, is_local, local_name

if TYPE_CHECKING:
    from mypy_boto3_kms import KMSClient  # types only (boto3-stubs, a dev dependency)

KEY_FILE_SUFFIX = ".key"


def key_file(local_key_dir: str | Path, key_ref: str) -> Path:
    return Path(local_key_dir) / f"{local_name(key_ref)}{KEY_FILE_SUFFIX}"


def read_local_key(local_key_dir: str | Path, key_ref: str) -> bytes:
    path = key_file(local_key_dir, key_ref)
    try:
        key = path.read_bytes()
    except OSError as exc:
        raise DecryptError(f"local key '{key_ref}' unreadable ({exc.strerror})") from None
    if len(key) != KEY_BYTES:
        raise DecryptError(f"local key '{key_ref}' is not {KEY_BYTES} bytes")
    return key


def ensure_local_key(local_key_dir: str | Path, key_ref: str) -> bytes:
    """The local key, created (random, mode 0600) when its file does not exist yet."""
    path = key_file(local_key_dir, key_ref)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_bytes(AESGCM.generate_key(bit_length=KEY_BYTES * 8))
    return read_local_key(local_key_dir, key_ref)


def _local_aad(key_id: str) -> bytes:
    return f"replay-data-key:{key_id}".encode()


def wrap_local(data_key: bytes, key_id: str, local_key: bytes) -> str:
    """Base64 of the data key sealed under a local key (the ``encrypted`` of a ``local:`` entry)."""
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(local_key).encrypt(nonce, data_key, _local_aad(key_id))
    return base64.b64encode(nonce + sealed).decode("ascii")


def unwrap_local(encrypted: str, key_id: str, local_key: bytes) -> bytes:
    raw = base64.b64decode(encrypted)
    try:
        return AESGCM(local_key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _local_aad(key_id))
    except (InvalidTag, ValueError):
        raise DecryptError(f"data key '{key_id}' does not open with its local key") from None


def kms_key_id(key_ref: str) -> str:
    return key_ref.removeprefix("kms:")


def kms_client(kms: KmsSettings) -> KMSClient:
    import boto3  # only runs that decrypt with KMS need it

    return boto3.client("kms", region_name=kms.region, endpoint_url=kms.endpoint_url)


def unwrap_kms(encrypted: str, key_id: str, key_ref: str, client: KMSClient) -> bytes:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        answer = client.decrypt(CiphertextBlob=base64.b64decode(encrypted), KeyId=kms_key_id(key_ref))
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "error")
        raise DecryptError(f"KMS refused data key '{key_id}' ({code})") from None
    except BotoCoreError as exc:
        raise DecryptError(f"KMS unreachable for data key '{key_id}' ({type(exc).__name__})") from None
    plain: bytes = answer["Plaintext"]
    if len(plain) != KEY_BYTES:
        raise DecryptError(f"data key '{key_id}' is not {KEY_BYTES} bytes")
    return plain


class DataKeyCache:
    """Unwrapped data keys (or the reason one cannot be unwrapped) of this process."""

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str], bytes | DecryptError] = {}
        self._lock = threading.Lock()
        self.unwrapped = 0  # how many unwraps this process made (tests, diagnostics)

    def get(self, key_id: str, ref: DataKeyRef, *, kms: KmsSettings, local_key_dir: str | None) -> bytes:
        slot = (key_id, ref.encrypted)
        with self._lock:
            found = self._keys.get(slot)
            if found is None:
                found = self._unwrap(key_id, ref, kms, local_key_dir)
                self._keys[slot] = found
        if isinstance(found, DecryptError):
            raise DecryptError(found.reason)
        return found

    def _unwrap(
        self, key_id: str, ref: DataKeyRef, kms: KmsSettings, local_key_dir: str | None
    ) -> bytes | DecryptError:
        self.unwrapped += 1
        how = "local" if is_local(ref.key_ref) else "kms"
        print(f"replay-keys: unwrapping data key {key_id} ({how}) in process {os.getpid()}", file=sys.stderr)
        try:
            if is_local(ref.key_ref):
                local = read_local_key(local_key_dir or ".", ref.key_ref)
                return unwrap_local(ref.encrypted, key_id, local)
            return unwrap_kms(ref.encrypted, key_id, ref.key_ref, kms_client(kms))
        except DecryptError as exc:
            return exc


_PROCESS_CACHE: DataKeyCache | None = None


def process_cache() -> DataKeyCache:
    """This worker process's cache, made on first use (never on the driver unless it decrypts)."""
    global _PROCESS_CACHE
    if _PROCESS_CACHE is None:
        _PROCESS_CACHE = DataKeyCache()
    return _PROCESS_CACHE


class KeyResolver:
    """``envelope.Resolver`` for one spec: key id -> data key through the process cache."""

    def __init__(
        self, data_keys: Mapping[str, DataKeyRef], kms: KmsSettings, local_key_dir: str | None
    ) -> None:
        self._refs = data_keys
        self._kms = kms
        self._local_key_dir = local_key_dir

    def __call__(self, key_id: str) -> bytes:
        ref = self._refs.get(key_id)
        if ref is None:
            raise KeyError(key_id)
        return process_cache().get(key_id, ref, kms=self._kms, local_key_dir=self._local_key_dir)
