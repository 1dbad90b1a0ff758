"""``map_in_arrow`` calls PySpark internals: held to the public RDD path's output, and to its pin."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyspark
import pytest
from pyspark import TaskContext
from pyspark.sql import DataFrame, Row, SparkSession

from spark_job.arrow_map import PYSPARK_MINOR, ArrowMapFunction, map_in_arrow, map_in_arrow_without_pandas

pytestmark = pytest.mark.spark

REPO_ROOT = Path(__file__).resolve().parents[2]
OUT_SCHEMA = "partition int, key string, size int, twice long"
_OUT_ARROW = pa.schema(
    [("partition", pa.int32()), ("key", pa.string()), ("size", pa.int32()), ("twice", pa.int64())]
)


def describe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Per row: the task's partition, the key, the value's length and twice the number."""
    context = TaskContext.get()
    assert context is not None
    for batch in batches:
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([context.partitionId()] * batch.num_rows, pa.int32()),
                batch.column(0),
                pc.binary_length(batch.column(1)),
                pc.multiply(batch.column(2), 2),
            ],
            schema=_OUT_ARROW,
        )


def through_the_rdd(df: DataFrame, func: ArrowMapFunction) -> list[Row]:
    """The public path: rows of each partition as one Arrow batch, ``func`` over it, rows back."""
    arrow_schema = pa.schema([("k", pa.string()), ("v", pa.binary()), ("n", pa.int64())])

    def partition(rows: Iterable[Row]) -> Iterator[Row]:
        batch = pa.RecordBatch.from_pylist([row.asDict() for row in rows], schema=arrow_schema)
        for out in func(iter([batch])):
            yield from (Row(**record) for record in out.to_pylist())

    spark = df.sparkSession
    return spark.createDataFrame(df.rdd.mapPartitions(partition), OUT_SCHEMA).collect()


@pytest.fixture(scope="module")
def frame(spark: SparkSession) -> DataFrame:
    rows = [(f"k{i}", None if i % 7 == 0 else bytes(i % 5), i) for i in range(60)]
    return spark.createDataFrame(rows, "k string, v binary, n long").repartition(3, "k")


@pytest.mark.parametrize("mapper", [map_in_arrow, map_in_arrow_without_pandas])
def test_arrow_map_gives_what_the_rdd_path_gives(frame: DataFrame, mapper: Any) -> None:
    expected = sorted(through_the_rdd(frame, describe))
    actual = sorted(mapper(frame, describe, OUT_SCHEMA).collect())

    assert expected == actual
    assert {row["partition"] for row in actual} == {0, 1, 2}


def test_the_installed_pyspark_is_the_minor_version_arrow_map_was_checked_against() -> None:
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins = [spec for specs in extras.values() for spec in specs if re.match(r"pyspark\b", spec)]
    [pin] = sorted(set(pins))

    assert pin.startswith(f"pyspark=={PYSPARK_MINOR}."), f"{pin}: arrow_map was checked on {PYSPARK_MINOR}"
    assert pyspark.__version__.startswith(f"{PYSPARK_MINOR}.")
