"""Whether this daemon's jobs can read a source's table format at all, asked before anything exists."""

from __future__ import annotations

from daemon.config.settings import Settings
from daemon.core.errors import BadRequest
from daemon.core.spark_releases import missing_runtime
from daemon.usecases.catalog import Source


def check_table_runtime(source: Source, settings: Settings) -> None:
    """A job spark-submit starts here (locally or on a cluster) reads Iceberg and Delta only with
    their runtimes' jars: a replay or a pipeline of such a source is refused before anything is
    created, not failed in the job (EMR's images carry them)."""
    if settings.launcher == "emr":
        return
    missing = missing_runtime(source.table.format, [jar.name for jar in settings.local_jars])
    if missing is not None:
        raise BadRequest(
            f"source '{source.name}' is a {source.table.format} table and this daemon's local jobs have "
            f"no {missing}: list it in REPLAY_LOCAL_JARS (scripts/lake-jars fetches it)"
        )
