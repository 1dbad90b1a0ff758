"""What a daemon's start costs: the table formats' libraries are imported only for a catalog that has
such sources (pyiceberg and deltalake were about 1 s of a start's 2.6 s of CPU)."""

from __future__ import annotations

import subprocess
import sys

LAKE_LIBRARIES = ("pyiceberg", "deltalake")


def _imported_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint(sorted({{m.split('.')[0] for m in sys.modules}}))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return [name for name in LAKE_LIBRARIES if f"'{name}'" in done.stdout]


def test_the_daemons_modules_import_no_table_format_library() -> None:
    assert _imported_after("import daemon.runtime.server, daemon.runtime.readiness") == []


def test_a_reader_is_made_for_the_formats_asked_and_only_those() -> None:
    prepared = "from daemon.runtime.server import LakeTableStats\nLakeTableStats().prepare({})"
    assert _imported_after(prepared.format("['parquet']")) == []
    assert _imported_after(prepared.format("['delta']")) == ["deltalake"]
    assert _imported_after(prepared.format("['iceberg', 'parquet']")) == ["pyiceberg"]
