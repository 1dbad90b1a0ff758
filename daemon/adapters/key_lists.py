"""A key file (``keys=@<file>``), read with pyarrow: its distinct keys and the digest that pins them.

A text file holds one key per line (blank lines skipped, spaces around a key dropped); a ``.parquet``
file its keys in the column ``key`` (else its first column). The plan reads it once, before anything
is created, and the run records its digest: the job reads the same file and refuses to publish when
the keys it finds are not the ones planned (the file changed in between).
"""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from daemon.core.errors import BadRequest, DependencyDown
from daemon.usecases.ports import KeyList

MAX_KEY_FILE_BYTES = 16 * 1024 * 1024
MAX_FILE_KEYS = 100_000


def read_key_list(path: str) -> KeyList:
    """The file's distinct keys (at most ``MAX_FILE_KEYS``) and their digest."""
    try:
        filesystem, inner = (
            pafs.FileSystem.from_uri(path) if "://" in path else (pafs.LocalFileSystem(), path)
        )
        size = filesystem.get_file_info(inner).size
        if size is None:
            raise FileNotFoundError(f"no file at {path}")
        if size > MAX_KEY_FILE_BYTES:
            raise BadRequest(
                f"the key file at {path} is {size:,} bytes; a key file is at most {MAX_KEY_FILE_BYTES:,}"
            )
        if path.endswith(".parquet"):
            with filesystem.open_input_file(inner) as handle:
                table = pq.read_table(handle)
            column = table.column("key") if "key" in table.column_names else table.column(0)
            keys = [str(key) for key in column.to_pylist() if key is not None]
        else:
            with filesystem.open_input_stream(inner) as handle:
                text = handle.read().decode("utf-8")
            keys = [line.strip() for line in text.splitlines() if line.strip()]
    except (OSError, pa.ArrowInvalid, UnicodeDecodeError, IndexError) as exc:
        raise DependencyDown("key_file", path, f"cannot read the key file at {path}: {exc}") from exc
    distinct = sorted(set(keys))
    if not distinct:
        raise BadRequest(f"the key file at {path} lists no keys")
    if len(distinct) > MAX_FILE_KEYS:
        raise BadRequest(
            f"the key file at {path} lists {len(distinct):,} keys; a key file holds at most {MAX_FILE_KEYS:,}"
        )
    return KeyList(keys=tuple(distinct), digest=key_digest(distinct))


def key_digest(keys: list[str]) -> str:
    """What pins a key list: SHA-256 of its sorted distinct keys, one per line (the job computes the
    same over what it reads)."""
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()
