"""Envelope encryption of single column values: the format, pure (no I/O, no key lookup of its own).

Each value is encrypted with AES-256-GCM under a 32-byte *data key*; the data key itself is stored
encrypted under a KMS key (or a local development key, see ``spark_job.pii.keys``). A value is stored as
standard base64 of::

    version (1 byte, 0x01) | key id length (1 byte) | key id (ascii) | nonce (12 bytes)
    | ciphertext | tag (16 bytes)

The first three fields (the *header*) are the GCM associated data, so a changed version or key id
fails authentication like a changed ciphertext does. Errors are ``DecryptError`` whose message
never contains the plaintext nor the token: reasons are fixed phrases, and nothing raised here
chains the underlying exception (its text could quote bytes of either).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from spark_job.errors import JobError

VERSION = 0x01
KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
MAX_KEY_ID = 255
Resolver = Callable[[str], bytes]  # key id -> data key; raises KeyError or DecryptError when unknown


class DecryptError(JobError):
    """A value that cannot be decrypted; says which column and event, never what the value was."""

    def __init__(self, reason: str, *, column: str | None = None, event_id: str | None = None) -> None:
        self.reason = reason
        self.column = column
        self.event_id = event_id
        where = ""
        if column is not None:
            where = f"column '{column}'" + (f" of event '{event_id}'" if event_id is not None else "")
        super().__init__(f"cannot decrypt {where}: {reason}" if where else f"cannot decrypt value: {reason}")

    def at(self, column: str, event_id: str | None) -> DecryptError:
        """The same reason, located at a row's column."""
        return DecryptError(self.reason, column=column, event_id=event_id)


def _header(key_id: str) -> bytes:
    encoded = key_id.encode("ascii")
    if not 0 < len(encoded) <= MAX_KEY_ID:
        raise ValueError(f"a data key id is 1..{MAX_KEY_ID} ascii characters")
    return bytes([VERSION, len(encoded)]) + encoded


def new_data_key() -> bytes:
    return AESGCM.generate_key(bit_length=KEY_BYTES * 8)


def encrypt_value(plaintext: str, data_key: bytes, key_id: str) -> str:
    """The base64 token of ``plaintext`` under ``data_key`` (a fresh random nonce each call)."""
    header = _header(key_id)
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(data_key).encrypt(nonce, plaintext.encode("utf-8"), header)
    return base64.b64encode(header + nonce + sealed).decode("ascii")


def token_key_id(raw: bytes) -> tuple[str, int]:
    """The key id a decoded token names and where its nonce starts; ``DecryptError`` if malformed."""
    if len(raw) < 2:
        raise DecryptError("value too short to be encrypted")
    if raw[0] != VERSION:
        raise DecryptError(f"unsupported format version {raw[0]}")
    end = 2 + raw[1]
    if raw[1] == 0 or len(raw) < end + NONCE_BYTES + TAG_BYTES:
        raise DecryptError("value too short to be encrypted")
    try:
        key_id = raw[2:end].decode("ascii")
    except UnicodeDecodeError:
        raise DecryptError("malformed data key id") from None
    if not key_id.isprintable():
        raise DecryptError("malformed data key id")
    return key_id, end


def decrypt_value(token: str, resolve: Resolver) -> str:
    """The plaintext of a token; ``resolve`` maps the token's key id to its data key."""
    try:
        raw = base64.b64decode(token.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise DecryptError("not base64") from None
    key_id, nonce_at = token_key_id(raw)
    try:
        data_key = resolve(key_id)
    except KeyError:
        raise DecryptError("unknown data key id") from None
    nonce = raw[nonce_at : nonce_at + NONCE_BYTES]
    try:
        plain = AESGCM(data_key).decrypt(nonce, raw[nonce_at + NONCE_BYTES :], raw[:nonce_at])
    except (InvalidTag, ValueError):
        raise DecryptError("authentication failed (wrong data key or corrupted value)") from None
    try:
        return plain.decode("utf-8")
    except UnicodeDecodeError:
        raise DecryptError("plaintext is not UTF-8") from None
