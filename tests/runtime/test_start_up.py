"""What a daemon's start costs: the table formats' libraries are imported only for a catalog that has
such sources (pyiceberg and deltalake were about 1 s of a start's 2.6 s of CPU), AWS's and the Hive
metastore's clients only by a daemon that calls them."""

from __future__ import annotations

import subprocess
import sys

LAKE_LIBRARIES = ("pyiceberg", "deltalake")
CLIENT_LIBRARIES = ("boto3", "hive_metastore", "thrift")


def _imported_after(code: str, libraries: tuple[str, ...] = LAKE_LIBRARIES) -> list[str]:
    probe = f"{code}\nimport sys\nprint(sorted({{m.split('.')[0] for m in sys.modules}}))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return [name for name in libraries if f"'{name}'" in done.stdout]


def test_the_daemons_modules_import_no_table_format_library_nor_aws_nor_thrift_nor_spark() -> None:
    """The daemon launches Spark jobs, it does not run Spark: pyspark is for the jobs' own processes."""
    modules = "import daemon.runtime.server, daemon.runtime.readiness"
    assert _imported_after(modules, (*LAKE_LIBRARIES, *CLIENT_LIBRARIES, "pyspark")) == []


def test_a_daemon_imports_boto3_and_thrift_only_to_call_aws_or_a_metastore() -> None:
    """boto3 was a few tenths of a second of every start's imports; a local daemon without a Glue or Hive
    catalog calls neither (the test above). Asked for a Glue client and a Hive table, it imports both."""
    called = (
        "import contextlib\nfrom daemon.adapters import table_catalogs as t\n"
        "from daemon.config.lake_catalogs import LakeCatalog\n"
        "t._glue(LakeCatalog(type='glue', region='us-east-1'))\n"
        "with contextlib.suppress(Exception):\n"
        "    t._hive_table('h', LakeCatalog(type='hive', uri='thrift://127.0.0.1:9'), 'd', 't')"
    )
    assert _imported_after(called, CLIENT_LIBRARIES) == list(CLIENT_LIBRARIES)


def test_a_reader_is_made_for_the_formats_asked_and_only_those() -> None:
    prepared = "from daemon.runtime.server import LakeTableStats\nLakeTableStats().prepare({})"
    assert _imported_after(prepared.format("['parquet']")) == []
    assert _imported_after(prepared.format("['delta']")) == ["deltalake"]
    assert _imported_after(prepared.format("['iceberg', 'parquet']")) == ["pyiceberg"]
