"""The job's pure ``DataFrame -> DataFrame`` steps: read, select the window, shape records, distribute.

The window filter sits directly on the partition column so Spark prunes whole partitions (only the
window's files are read). Record values are built in the JVM (``to_json(struct(*))``) and cast to
binary there, after the shuffle (ADR 0060), so the Python side only hands ready bytes to the
producer. A raw (bronze) record's key and value bytes pass through untouched, and its own headers
travel in a column of their own.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import reduce

import pyarrow as pa
from py4j.protocol import Py4JJavaError
from pyspark import TaskContext
from pyspark.errors import AnalysisException, IllegalArgumentException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DateType,
    IntegralType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from spark_job.arrow_map import map_in_arrow
from spark_job.errors import SourceError
from spark_job.publish.publisher import EVENT_ID, HEADERS, OFFSET, TIMESTAMP
from spark_job.spec.model import (
    Bound,
    CommitRange,
    DayWindow,
    JobSpec,
    Selection,
    Source,
    TimeWindow,
    WatermarkRange,
    event_timestamp_column,
)
from spark_job.spec.row_filter import FilterNode, FilterValue, Junction, Negation

KEY = "_replay_key"
VALUE = "_replay_value"
_TIME = "_replay_time"
_ID = "_replay_id"
_VALUE_PART = "_replay_value_"  # the value's own columns until it is made: _replay_value_0, ...
_SIZES = pa.schema([("partition", pa.int32()), ("rows", pa.int64())])


def read_source(spark: SparkSession, source: Source, selection: Selection | None = None) -> DataFrame:
    """The source table. An Iceberg or Delta table is read through its format, at the run's snapshot
    when it has one (the window's filter is pushed down to the table's metadata). For Parquet, the
    files the plan listed when it did (nothing written since is read); else, for a day window, only the
    day directories (`<path>/<column>=<day>`) are given to Spark, which lists
    every file under the paths it gets before pruning anything; with none of them there, the whole
    table (the window has no rows either way)."""
    if source.table is not None:
        return spark.table(source.table)
    if isinstance(selection, CommitRange) and selection.low is not None:
        return _appended(spark, source, selection.low, selection.high)
    reader = spark.read.format(source.format)
    if source.format in ("iceberg", "delta"):  # the table's own metadata prunes; pinned when told
        if source.snapshot is None:
            return reader.load(source.path)
        reader = reader.option(
            "snapshot-id" if source.format == "iceberg" else "versionAsOf", source.snapshot
        )
        try:
            return reader.load(source.path)
        except (AnalysisException, IllegalArgumentException, Py4JJavaError) as exc:
            gone = _snapshot_gone(source, str(exc))
            if gone is None:
                raise
            raise gone from exc
    if source.files is not None and source.path is not None:  # the files the plan listed, no others
        base = source.path.rstrip("/")
        if not source.files:
            return reader.load(source.path).limit(0)
        try:
            return reader.option("basePath", base).load([f"{base}/{file}" for file in source.files])
        except AnalysisException as exc:
            if exc.getCondition() != "PATH_NOT_FOUND":
                raise
            raise SourceError(
                f"a file of source {source.name} that the plan listed is gone ({str(exc).strip()[:300]}): "
                "the table was rewritten since; replay the window again to read it as it is now"
            ) from exc
    if isinstance(selection, DayWindow) and source.path is not None:
        base = source.path.rstrip("/")
        span = (selection.end_day - selection.start_day).days + 1
        days = ",".join((selection.start_day + timedelta(days=n)).isoformat() for n in range(span))
        try:  # a Hadoop glob: `{a,b}` is expanded into the paths, nothing else is listed
            return reader.option("basePath", base).load(f"{base}/{selection.column}={{{days}}}")
        except AnalysisException as exc:
            if exc.getCondition() != "PATH_NOT_FOUND":
                raise
    return reader.load(source.path)


# What Delta's change data feed adds to each row: which change, and the commit it came in.
_CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def _appended(spark: SparkSession, source: Source, low: str, high: str) -> DataFrame:
    """The rows the commits after ``low`` up to ``high`` appended: an Iceberg incremental append scan
    (``start-snapshot-id`` exclusive, ``end-snapshot-id`` inclusive), or Delta's change data feed
    over versions ``low + 1 .. high``, its inserts only (the daemon refused any range holding a commit
    that deleted or changed rows, so inserts are all a range holds)."""
    if source.format == "iceberg":
        reader = spark.read.format("iceberg").option("start-snapshot-id", low).option("end-snapshot-id", high)
    else:
        reader = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", int(low) + 1)
            .option("endingVersion", int(high))
        )
    try:
        frame = reader.load(source.path)
    except (AnalysisException, IllegalArgumentException, Py4JJavaError) as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SourceError(
            f"the {source.format} table of source {source.name} cannot give the rows its commits "
            f"({low}, {high}] appended ({detail}): the pipeline's last published snapshot may have "
            "expired, or the change data feed was off for these commits"
        ) from exc
    if source.format == "delta":
        frame = frame.where(sf.col("_change_type") == "insert").drop(*_CHANGE_COLUMNS)
    return frame


# How each runtime says a pinned snapshot is not in the table (Iceberg 1.10, Delta 4.0): expired,
# vacuumed or never there, the run cannot read what it planned on.
_SNAPSHOT_GONE = ("Cannot find snapshot with ID", "Cannot time travel Delta table to version")
# A table named in a catalog is read from the metadata file its plan recorded (Iceberg 1.10's words
# when that file is gone).
_METADATA_GONE = "NotFoundException: Failed to open input stream for file"


def _snapshot_gone(source: Source, message: str) -> SourceError | None:
    """The clear failure for a run whose pinned snapshot the table no longer has; None for others."""
    if source.path is not None and source.path.endswith(".metadata.json") and _METADATA_GONE in message:
        return SourceError(
            f"the iceberg table of source {source.name} no longer has the metadata file this run was "
            f"planned on ({source.path}; its maintenance removed it): replay the window again to plan "
            "on the table's current snapshot"
        )
    if not any(marker in message for marker in _SNAPSHOT_GONE):
        return None
    detail = message.strip().splitlines()[0] if message.strip() else ""
    return SourceError(
        f"the {source.format} table of source {source.name} no longer has snapshot {source.snapshot}, "
        f"which this run was planned on (expired or cleaned up since; {detail}): replay the window again "
        "to plan on the table's current snapshot"
    )


def required_columns(spec: JobSpec) -> list[str]:
    selected_by = [] if isinstance(spec.selection, CommitRange) else [spec.selection.column]
    wanted = [*selected_by, spec.key_column, spec.event_id_column]
    wanted += [name for name in (spec.event_time_column, spec.value_column) if name]
    wanted += [name for name in (spec.headers_column, spec.raw_timestamp_column) if name]
    wanted += list(spec.value_columns or ())
    wanted += spec.where.columns() if spec.where is not None else []
    return list(dict.fromkeys(wanted))


def require_columns(df: DataFrame, spec: JobSpec) -> None:
    known = {name.lower() for name in df.columns}
    for name in required_columns(spec):
        if name.lower() not in known:
            raise SourceError(f"unknown column '{name}' in source {spec.source.name}")


def window_condition(df: DataFrame, selection: Selection) -> Column:
    """The filter selecting the window: inclusive days, ``[start, end)`` or ``(low, high]`` (a commit
    range is selected by the read itself)."""
    if isinstance(selection, CommitRange):
        return sf.lit(True)
    column = sf.col(selection.column)
    kind = df.schema[selection.column].dataType
    if isinstance(selection, DayWindow):
        if isinstance(kind, DateType):
            return (column >= sf.lit(selection.start_day)) & (column <= sf.lit(selection.end_day))
        if isinstance(kind, StringType):
            return (column >= selection.start_day.isoformat()) & (column <= selection.end_day.isoformat())
        if isinstance(kind, TimestampType | TimestampNTZType):
            start = datetime.combine(selection.start_day, time(), UTC)
            end = datetime.combine(selection.end_day + timedelta(days=1), time(), UTC)
            return (column >= _literal(start, kind)) & (column < _literal(end, kind))
        raise SourceError(f"window column '{selection.column}' is {kind.simpleString()}, not a day or date")
    if isinstance(selection, TimeWindow):
        if not isinstance(kind, TimestampType | TimestampNTZType | DateType):
            raise SourceError(f"window column '{selection.column}' is {kind.simpleString()}, not a timestamp")
        return (column >= _literal(selection.start, kind)) & (column < _literal(selection.end, kind))
    condition = sf.lit(True)
    if selection.low is not None:
        condition = condition & (column > _literal(selection.low, kind))
    if selection.high is not None:
        condition = condition & (column <= _literal(selection.high, kind))
    return condition


def _literal(value: Bound | datetime, kind: DataType) -> Column:
    if isinstance(value, datetime):
        moment = value.astimezone(UTC)
        if isinstance(kind, TimestampNTZType):
            return sf.lit(moment.strftime("%Y-%m-%d %H:%M:%S.%f")).cast(kind)
        return sf.lit(moment.isoformat()).cast(TimestampType())
    return sf.lit(value).cast(kind)


def select_window(df: DataFrame, spec: JobSpec) -> DataFrame:
    require_columns(df, spec)
    condition = window_condition(df, spec.selection)
    if spec.where is not None:  # beside the window's own condition: one filter the scan can push down
        condition = condition & filter_condition(df, spec.where.tree)
    return df.where(condition)


def filter_condition(df: DataFrame, node: FilterNode) -> Column:
    """A ``where=`` tree as a Spark column expression (SQL's three-valued logic: a null matches no
    comparison, and ``not`` of an unknown is unknown, so such rows are left out)."""
    if isinstance(node, Junction):
        parts = [filter_condition(df, part) for part in node.parts]
        return reduce(lambda a, b: (a & b) if node.both else (a | b), parts)
    if isinstance(node, Negation):
        return ~filter_condition(df, node.part)
    column = sf.col(node.column)
    if node.test == "is_null":
        return column.isNotNull() if node.negated else column.isNull()
    kind = df.select(node.column).schema.fields[0].dataType
    values = [_filter_literal(value, kind) for value in node.values]
    if node.test == "compare":
        return _COMPARE[node.comparison](column, values[0])
    test = column.isin(values) if node.test == "in" else column.between(values[0], values[1])
    return ~test if node.negated else test


_COMPARE: dict[str, Callable[[Column, Column], Column]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _filter_literal(value: FilterValue, kind: DataType) -> Column:
    """A filter's value as a literal of its own type; a date against a timestamp is its UTC midnight
    (never the session's time zone), and numbers are never cast to the column's type (10.5 against
    whole numbers stays 10.5)."""
    if isinstance(value, datetime):
        return _literal(value, kind)
    if isinstance(value, date) and isinstance(kind, TimestampType | TimestampNTZType):
        return _literal(datetime.combine(value, time(), UTC), kind)
    return sf.lit(value)


def watermark_high(selected: DataFrame, selection: WatermarkRange) -> Bound:
    """The watermark the run covers: ``high`` if given, else the largest value selected (else ``low``)."""
    if selection.high is not None:
        return selection.high
    row = selected.agg(sf.max(selection.column).cast("string")).first()
    return selection.low if row is None or row[0] is None else row[0]


@dataclass(frozen=True, eq=False)  # a Column has no truth value to compare by
class Records:
    """The rows to publish, before ``distribute`` spreads them: ``frame`` has the key, what ordering
    sorts by, the other record columns and the value's own columns (under names of the job's own, so
    no source column can pass for one of the record's); ``value`` makes the value from those, after
    the shuffle. Every task waits for the shuffle's map side to read the whole window, so the values
    (a json value is the window's widest work) are made by the tasks as they send, not before the
    first one can (ADR 0060)."""

    frame: DataFrame
    value: Column

    def with_values(self) -> DataFrame:
        """The frame with each record's value made where it stands, with no shuffle in between."""
        return self.frame.withColumn(VALUE, self.value)


def with_record_columns(selected: DataFrame, spec: JobSpec) -> Records:
    """Key as binary, plus what ordering sorts by (and a raw record's own headers); the value, binary
    too, to be made after the shuffle.

    A json value is the event's columns as JSON, under their own names; a raw value is the stored
    bytes, untouched.
    """
    names = (
        value_columns(selected.columns, spec) if spec.value_format == "json" else [spec.value_column or ""]
    )
    hidden = [f"{_VALUE_PART}{index}" for index in range(len(names))]
    time_column = sf.col(spec.event_time_column) if spec.event_time_column else sf.lit(None)
    headers = [_record_headers(selected, spec.headers_column)] if spec.headers_column else []
    offsets = [scaled_time(spec).alias(OFFSET)] if spec.shape is not None else []
    frame = selected.select(
        _as_bytes(selected, spec.key_column).alias(KEY),
        *headers,
        time_column.alias(_TIME),
        sf.col(spec.event_id_column).alias(_ID),
        *_timestamp_columns(selected, spec),
        *offsets,
        *[sf.col(name).alias(part) for name, part in zip(names, hidden, strict=True)],
    )
    if spec.value_format == "json":
        fields = [sf.col(part).alias(name) for name, part in zip(names, hidden, strict=True)]
        value = sf.to_json(sf.struct(*fields)).cast("binary")
    else:
        value = _as_bytes(frame, hidden[0])
    return Records(frame, value)


def scaled_time(spec: JobSpec) -> Column:
    """A shaped replay's clock for each event: seconds from the window's start, over the speed."""
    assert spec.shape is not None and spec.event_time_column, "a shaped replay has a shape and a time"
    moment = sf.unix_micros(sf.col(spec.event_time_column).cast("timestamp")) / 1e6
    return (moment - sf.lit(spec.shape.origin)) / sf.lit(spec.shape.speed)


def shape_counts(selected: DataFrame, spec: JobSpec, width: float) -> list[int]:
    """The window's events per ``width`` seconds of scaled time (one pass, partial counts only)."""
    bucket = sf.floor(scaled_time(spec) / sf.lit(width)).cast("long").alias("bucket")
    rows = selected.groupBy(bucket).agg(sf.count(sf.lit(1)).alias("rows")).collect()
    found = {int(row["bucket"]): int(row["rows"]) for row in rows if row["bucket"] is not None}
    counts = [0] * (max(found, default=-1) + 1)
    for index, rows_in in found.items():
        if index >= 0:
            counts[index] = rows_in
    return counts


def value_columns(columns: list[str], spec: JobSpec) -> list[str]:
    """A json value's columns: the spec's list, else every column but the partition column."""
    if spec.value_columns is not None:
        return list(spec.value_columns)
    layout = (spec.partition_column or "").lower()
    return [name for name in columns if name.lower() != layout]


def _type_of(df: DataFrame, name: str) -> DataType:
    return next(field.dataType for field in df.schema.fields if field.name.lower() == name.lower())


def _as_bytes(df: DataFrame, name: str) -> Column:
    """Binary columns exactly as stored (raw bytes are never re-encoded); anything else as UTF-8 text."""
    if isinstance(_type_of(df, name), BinaryType):
        return sf.col(name)
    return sf.col(name).cast("string").cast("binary")


def _record_headers(df: DataFrame, name: str) -> Column:
    """A bronze headers column as ``array<struct<name: string, value: binary>>``, order kept."""
    kind = _type_of(df, name)
    element = kind.elementType if isinstance(kind, ArrayType) else None
    fields = {field.name for field in element.fields} if isinstance(element, StructType) else set()
    if fields != {"name", "value"}:
        raise SourceError(
            f"headers column '{name}' is {kind.simpleString()}, "
            "not an array of struct<name: string, value: binary>"
        )
    as_header = sf.transform(
        sf.col(name),
        lambda header: sf.struct(
            header["name"].cast("string").alias("name"), header["value"].cast("binary").alias("value")
        ),
    )
    return as_header.alias(HEADERS)


def _timestamp_columns(selected: DataFrame, spec: JobSpec) -> list[Column]:
    """With ``timestamp=event``: the record's timestamp in epoch ms, from the event time (or a bronze
    record's original timestamp). An integral column is taken as epoch ms already (Kafka's unit)."""
    name = event_timestamp_column(spec) if spec.timestamp == "event" else None
    if name is None:
        return []
    if isinstance(_type_of(selected, name), IntegralType):
        return [sf.col(name).cast("long").alias(TIMESTAMP)]
    return [sf.unix_millis(sf.col(name).cast("timestamp")).alias(TIMESTAMP)]


def distribute(records: Records, partitions: int, ordering: str, *, ordered: bool = False) -> DataFrame:
    """Exactly ``partitions`` partitions, by the hash of ``partition_column`` (the entity key, or the
    event id without ordering), in event-time order with ``entity`` or when the replay is shaped (its
    tasks send by their events' own times): ``planned_sizes`` counts them. ``ordered``: in a total
    order whatever the ordering (by event id without one), the same in every attempt at a partition:
    ties (an id that repeats, a null one) are broken by the record's key and value, since neither
    Spark's shuffle nor its sort keeps the order of equal rows from one attempt to the next. Values
    are made after the shuffle (``Records``), before the sort only where they break its ties."""
    frame = records.frame
    if ordering == "entity":
        spread, order = frame.repartition(partitions, KEY), [_TIME, _ID]
    elif OFFSET in frame.columns:
        spread, order = frame.repartition(partitions, _ID), [_TIME, _ID]
    else:
        spread, order = frame.repartition(partitions, _ID), [_ID] if ordered else []
    if ordered:
        spread = spread.withColumn(VALUE, records.value).sortWithinPartitions(*order, KEY, VALUE)
    elif order:
        spread = spread.sortWithinPartitions(*order)
    value = sf.col(VALUE) if ordered else records.value.alias(VALUE)
    optional = [name for name in (HEADERS, TIMESTAMP, OFFSET) if name in frame.columns]
    return spread.select(KEY, value, *optional, sf.col(_ID).cast("string").alias(EVENT_ID))


def partition_column(selected: DataFrame, spec: JobSpec) -> Column:
    """What ``distribute`` hashes, computed from the selected rows exactly as ``with_record_columns``
    computes ``KEY`` and ``_ID``."""
    if spec.ordering == "entity":
        return _as_bytes(selected, spec.key_column)
    return sf.col(spec.event_id_column)


@dataclass(frozen=True)
class Census:
    """What the counting pass found: rows per hash bucket (``pmod(hash, modulus)``) and the largest
    watermark value when the run needs it."""

    modulus: int
    buckets: dict[int, int]
    high: str | None = None

    @property
    def rows(self) -> int:
        return sum(self.buckets.values())

    def sizes(self, partitions: int) -> list[int] | None:
        """Rows per partition of ``distribute(..., partitions)``; None unless ``partitions`` divides
        the modulus (``pmod(h, m) mod n == pmod(h, n)`` only then)."""
        if self.modulus % partitions:
            return None
        sizes = [0] * partitions
        for bucket, rows in self.buckets.items():
            sizes[bucket % partitions] += rows
        return sizes


def census(selected: DataFrame, spec: JobSpec, modulus: int, *, high: bool = False) -> Census:
    """One pass over the window reading only the partitioning column (and the watermark column when
    ``high``): rows per bucket of Spark's own hash partitioning (``HashPartitioning`` is
    ``pmod(murmur3(columns, 42), n)``, which ``sf.hash`` is). Never holds the rows: partial counts."""
    bucket = sf.pmod(sf.hash(partition_column(selected, spec)), sf.lit(modulus)).alias("bucket")
    if not high or not isinstance(spec.selection, WatermarkRange):
        rows = selected.groupBy(bucket).agg(sf.count(sf.lit(1)).alias("rows")).collect()
        return Census(modulus, {row["bucket"]: row["rows"] for row in rows})
    column = spec.selection.column
    rows = (
        selected.select(bucket, sf.col(column))
        .rollup("bucket")
        .agg(
            sf.count(sf.lit(1)).alias("rows"),
            sf.max(column).cast("string").alias("high"),
            sf.grouping("bucket").alias("total"),
        )
        .collect()
    )
    total = next((row for row in rows if row["total"]), None)
    buckets = {row["bucket"]: row["rows"] for row in rows if not row["total"]}
    return Census(modulus, buckets, total["high"] if total is not None else None)


def _count_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    rows = sum(batch.num_rows for batch in batches)
    context = TaskContext.get()
    assert context is not None, "runs inside a Spark task"
    partition = context.partitionId()
    yield pa.RecordBatch.from_pydict({"partition": [partition], "rows": [rows]}, schema=_SIZES)


def partition_sizes(df: DataFrame, partitions: int) -> list[int]:
    """Rows in each partition, counted by reading them all (what ``census`` predicts cheaply)."""
    sizes = [0] * partitions
    for row in map_in_arrow(df, _count_rows, "partition int, rows long").collect():
        sizes[row["partition"]] = row["rows"]
    return sizes


def skew(sizes: list[int]) -> float | None:
    """Largest / smallest partition; None when a partition is empty (no finite ratio)."""
    smallest = min(sizes, default=0)
    return round(max(sizes) / smallest, 3) if smallest else None
