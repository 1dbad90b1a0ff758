"""Erasure lists in the job: the events of erased keys never leave the table.

Every read of the selection (the publish, the end-of-run reconcile, a reconcile run) goes through
``without_erased``: a left anti join with the list's keys up to its pinned version, broadcast (a list
of keys is small beside a window). Keys compare as text, so a numeric key column matches a list
written as CSV. A list that cannot be read stops the job before anything is published, with where it
looked: a run never goes without it. ``suppressed`` counts the events left out, for the report.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from spark_job.errors import SourceError
from spark_job.spec.model import Erasures, JobSpec

KEY = "__erased_key"  # the list's key column under a name no source column has


def erased_keys(spark: SparkSession, erasures: Erasures) -> DataFrame:
    """The list's distinct keys, as text, up to ``as_of`` (the whole list when None)."""
    try:
        reader = spark.read.format(erasures.format)
        if erasures.format == "csv":
            reader = reader.option("header", "true")
        listed = reader.load(erasures.path)
        missing = [name for name in (erasures.key, erasures.erased_at) if name not in listed.columns]
        if missing:
            raise SourceError(
                f"the erasure list at {erasures.path} has no column '{missing[0]}' "
                f"(its columns: {', '.join(listed.columns)})"
            )
        if erasures.as_of is not None:
            erased_at = sf.col(erasures.erased_at).cast("timestamp")
            listed = listed.where(erased_at <= sf.lit(erasures.as_of.astimezone(UTC)).cast("timestamp"))
        keys = listed.select(sf.col(erasures.key).cast("string").alias(KEY)).where(sf.col(KEY).isNotNull())
        return keys.distinct().localCheckpoint()  # read once: every action on the selection reuses it
    except AnalysisException as exc:
        raise SourceError(f"cannot read the erasure list at {erasures.path}: {exc}") from exc


def pinned(spark: SparkSession, spec: JobSpec) -> JobSpec:
    """``spec`` with its erasure list pinned to the newest erasure now on it (when the daemon did not
    pin one): the publish and its reconcile then honour one version, and the report names it."""
    erasures = spec.erasures
    if erasures is None or erasures.as_of is not None:
        return spec
    try:
        reader = spark.read.format(erasures.format)
        if erasures.format == "csv":
            reader = reader.option("header", "true")
        newest = sf.unix_micros(sf.max(sf.col(erasures.erased_at).cast("timestamp")))
        found = reader.load(erasures.path).select(newest).first()
    except AnalysisException as exc:
        raise SourceError(f"cannot read the erasure list at {erasures.path}: {exc}") from exc
    micros = found[0] if found is not None else None
    if micros is None:  # an empty list: nothing to leave out, and no version to name
        return spec
    moment = datetime.fromtimestamp(micros / 1_000_000, UTC)  # micros: no local zone on the way
    return replace(spec, erasures=replace(erasures, as_of=moment))


def version(erasures: Erasures) -> str | None:
    """The list's version as the report names it (ISO 8601, UTC); None: an empty list."""
    if erasures.as_of is None:
        return None
    return erasures.as_of.astimezone(UTC).isoformat().replace("+00:00", "Z")


def without_erased(selected: DataFrame, keys: DataFrame, column: str) -> DataFrame:
    """The rows of ``selected`` whose ``column`` is no key on the list (a null key is no erased key)."""
    return selected.join(sf.broadcast(keys), selected[column].cast("string") == keys[KEY], "left_anti")


def suppressed(selected: DataFrame, keys: DataFrame, column: str) -> int:
    """How many rows of ``selected`` the list leaves out (one Spark job over the selection)."""
    return selected.join(
        sf.broadcast(keys), selected[column].cast("string") == keys[KEY], "left_semi"
    ).count()
