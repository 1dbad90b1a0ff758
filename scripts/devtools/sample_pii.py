"""An encrypted ``email`` column for the sample table, so decryption can be exercised end to end.

The plaintext derives from the row's customer (``cus-00042`` -> ``customer-00042@example.com``);
the column is then encrypted with ``scripts.devtools.encrypt_column`` under a local key, which writes
``<table>/_keys.json`` and creates ``<key dir>/<name>.key`` when missing.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from scripts.devtools.encrypt_column import encrypt_table

EMAIL = "email"
SAMPLE_KEY_REF = "local:sample"


def email_of(customer_id: str) -> str:
    return f"customer-{customer_id.removeprefix('cus-')}@example.com"


def add_email_column(table: Path) -> None:
    """Add the plaintext ``email`` column after ``customer_id`` in every partition file."""
    for path in sorted(table.rglob("*.parquet")):
        data = pq.read_table(path)
        customers = data.column("customer_id")
        emails = pc.binary_join_element_wise(
            "customer-", pc.utf8_slice_codeunits(customers, 4), "@example.com", ""
        )
        at = data.column_names.index("customer_id") + 1
        data = data.add_column(at, pa.field(EMAIL, pa.string()), emails)
        pq.write_table(data, path, compression="snappy")


def add_encrypted_email(table: Path, key_dir: Path, key_ref: str = SAMPLE_KEY_REF) -> str:
    """Add and encrypt the ``email`` column; returns the data key id."""
    add_email_column(table)
    key_id, _ = encrypt_table(table, EMAIL, key_ref, local_key_dir=key_dir)
    return key_id
