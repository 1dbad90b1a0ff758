"""A key file (``keys=@<file>``) in the job: only the listed entities' events are read.

The file holds one key per line (blank lines skipped, spaces around a key dropped), or, for a
``.parquet`` file, the keys in its column ``key`` (else its first column): as the daemon's plan read
it (``daemon.adapters.key_lists``). The job reads it again, and refuses to publish when its keys' digest is
not the one the plan recorded (the file changed in between: the plan's count, and the reconcile's
expected ids, would no longer be this run's). The keys are few beside a window (at most 100,000):
collected here for the digest, then broadcast to a semi join.
"""

from __future__ import annotations

import hashlib

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from spark_job.errors import SourceError
from spark_job.spec.model import KeysFile

KEY = "__listed_key"


def listed_keys(spark: SparkSession, keys_file: KeysFile) -> DataFrame:
    """The file's distinct keys (column ``KEY``), once their digest is the plan's."""
    path = keys_file.path
    try:
        if path.endswith(".parquet"):
            table = spark.read.parquet(path)
            column = "key" if "key" in table.columns else table.columns[0]
            keys = table.select(sf.col(column).cast("string").alias(KEY))
        else:
            keys = spark.read.text(path).select(sf.trim(sf.col("value")).alias(KEY))
        keys = keys.where(sf.col(KEY).isNotNull() & (sf.col(KEY) != "")).distinct()
        found = sorted(row[KEY] for row in keys.collect())
    except AnalysisException as exc:
        raise SourceError(f"cannot read the key file at {path}: {exc}") from exc
    digest = hashlib.sha256("\n".join(found).encode()).hexdigest()
    if digest != keys_file.digest:
        raise SourceError(
            f"the key file at {path} changed since the run was planned ({len(found):,} keys now, digest "
            f"{digest[:12]}, planned {keys_file.digest[:12]}): replay again to plan on its new keys"
        )
    return spark.createDataFrame([(key,) for key in found], f"{KEY} string")


def only_listed(selected: DataFrame, keys: DataFrame, column: str) -> DataFrame:
    """The rows of ``selected`` whose ``column`` is a listed key."""
    return selected.join(sf.broadcast(keys), selected[column].cast("string") == keys[KEY], "left_semi")
