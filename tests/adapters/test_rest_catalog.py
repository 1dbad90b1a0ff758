"""An Iceberg table named in a REST catalog counts and pins as the same table at its path does.

The catalog is a real REST service on loopback: Iceberg's own REST servlet over a JDBC catalog
(`tests.fixtures.catalog_services`). The table is a private copy of the session's Spark-written
Iceberg table, registered and committed to through `pyiceberg`'s REST client, as another team's writer
would. A commit through the catalog moves what the name means; a count pinned to a planned snapshot
does not move with it.
"""

from __future__ import annotations

import shutil
import socket
import uuid
from datetime import date, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr
from pyiceberg.catalog.rest import RestCatalog

from daemon.adapters.lake_table_stats import LakeTableStats
from daemon.adapters.table_catalogs import TableCatalogs
from daemon.config.lake_catalogs import LakeCatalog
from daemon.core.errors import BadRequest, DependencyDown
from daemon.usecases.catalog import TableRef
from daemon.usecases.ports import WindowRows
from tests.fixtures.lake_catalog import commit_late_events, hadoop_metadata_file
from tests.fixtures.spark import LakeCopy

pytestmark = [pytest.mark.spark]

WEEK = [date(2024, 1, 1) + timedelta(days=n) for n in range(7)]
TOKEN = "rest-t0ken-not-for-logs"


def _settings(uri: str) -> LakeCatalog:
    return LakeCatalog(type="rest", uri=uri, password=SecretStr(TOKEN))


def test_a_table_named_in_a_rest_catalog_counts_and_pins_as_its_path_does_while_commits_move_it(
    rest_catalog_uri: str, lake_copies: dict[str, LakeCopy], tmp_path: Path
) -> None:
    copy = LakeCopy(**{**lake_copies["iceberg"].__dict__, "path": tmp_path / "orders"})
    shutil.copytree(lake_copies["iceberg"].path, copy.path)
    namespace = f"sales_{uuid.uuid4().hex[:8]}"
    writer = RestCatalog("writer", uri=rest_catalog_uri)
    writer.create_namespace(namespace)
    table = writer.register_table(f"{namespace}.orders", hadoop_metadata_file(copy))
    named = TableRef(table=f"lake.{namespace}.orders", format="iceberg")
    stats, by_path = (
        LakeTableStats(catalogs=TableCatalogs({"lake": _settings(rest_catalog_uri)})),
        LakeTableStats(),
    )
    at_path = TableRef(path=str(copy.path), format="iceberg")

    planned = stats.snapshot(named)
    assert planned == by_path.snapshot(at_path)
    assert stats.metadata_file(named) == hadoop_metadata_file(copy)
    window = WindowRows("dt", WEEK[1:3])
    before = stats.count_window_rows(named, window, snapshot=planned)
    assert before == by_path.count_window_rows(at_path, window) > 0

    commit_late_events(table, "2024-01-02", 5)

    assert stats.snapshot(named) != planned
    assert stats.count_window_rows(named, window) == before + 5
    assert stats.count_window_rows(named, window, snapshot=planned) == before  # pinned: the plan's rows
    with pytest.raises(BadRequest, match=rf"catalog 'lake' has no table {namespace}\.returns"):
        stats.snapshot(TableRef(table=f"lake.{namespace}.returns", format="iceberg"))


def test_a_rest_catalog_that_cannot_be_reached_is_a_dependency_down_without_its_token() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    stats = LakeTableStats(catalogs=TableCatalogs({"lake": _settings(closed)}))

    with pytest.raises(DependencyDown, match=r"cannot ask catalog 'lake' for sales\.orders") as caught:
        stats.snapshot(TableRef(table="lake.sales.orders", format="iceberg"))
    assert TOKEN not in str(caught.value)
