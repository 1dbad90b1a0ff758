"""Reading a spec document into ``JobSpec``: every field named by its dotted path when wrong.

Kept apart from ``spark_job.spec.model`` (the shape and its invariants), which it imports and which
never imports it: the model stays a plain value the daemon builds, and only the job reads JSON.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

from spark_job.errors import SpecError
from spark_job.spec.decrypt import DataKeyRef, Decrypt, KmsSettings
from spark_job.spec.model import (
    DEFAULT_PARTITIONER,
    CommitRange,
    Control,
    DayWindow,
    Erasures,
    Executor,
    JobSpec,
    KeysFile,
    OffsetRanges,
    Progress,
    Ramp,
    RateChange,
    ReconcileTarget,
    Redrive,
    Repair,
    Selection,
    Shape,
    Source,
    TimeWindow,
    WatermarkRange,
)
from spark_job.spec.row_filter import RowFilter
from spark_job.uris import read_text


def load_spec(uri: str) -> JobSpec:
    """Read and validate the spec at a path, ``file://`` or ``s3://`` URI."""
    try:
        text = read_text(uri)
    except OSError as exc:
        raise SpecError("<document>", f"cannot read {uri}: {exc}") from exc
    return spec_from_json(text)


def spec_from_json(text: str) -> JobSpec:
    """A validated ``JobSpec`` from its JSON text (what ``JobSpec.to_json`` wrote)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError("<document>", f"not valid JSON ({exc})") from exc
    return spec_from_dict(document)


def spec_from_dict(document: object) -> JobSpec:
    """A validated ``JobSpec`` from a decoded JSON document; unknown fields are refused."""
    return _parse(_Fields(document, ""))


class _Fields:
    """Reads one JSON object, naming every field by its dotted path and refusing unknown ones."""

    def __init__(self, document: object, prefix: str) -> None:
        if not isinstance(document, dict):
            raise SpecError(prefix or "<document>", "must be a JSON object")
        self.document: dict[str, object] = document
        self.prefix = prefix
        self.seen: set[str] = set()

    def path(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def get(
        self, key: str, kind: type | tuple[type, ...], *, required: bool = False, default: Any = None
    ) -> Any:
        self.seen.add(key)
        value = self.document.get(key)
        if value is None:
            if required:
                raise SpecError(self.path(key), "is required")
            return default
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            raise SpecError(self.path(key), f"must be {_names(kinds)}, got {value!r}")
        if not isinstance(value, kinds):
            raise SpecError(self.path(key), f"must be {_names(kinds)}, got {type(value).__name__}")
        if isinstance(value, str) and not value.strip() and required:
            raise SpecError(self.path(key), "must not be empty")
        return value

    def nested(self, key: str) -> _Fields | None:
        self.seen.add(key)
        value = self.document.get(key)
        return None if value is None else _Fields(value, self.path(key))

    def done(self) -> None:
        unknown = sorted(set(self.document) - self.seen)
        if unknown:
            raise SpecError(self.path(unknown[0]), "unknown field")


def _parse(doc: _Fields) -> JobSpec:
    source = doc.nested("source")
    if source is None:
        raise SpecError("source", "is required")
    progress = doc.nested("progress")
    spec = JobSpec(
        run_id=doc.get("run_id", str, required=True),
        source=_parse_source(source),
        selection=_parse_selection(doc.nested("window"), doc.nested("watermark"), doc.nested("commits")),
        topic=doc.get("topic", str, required=True),
        kafka=doc.get("kafka", dict, required=True),
        tps=doc.get("tps", int, required=True),
        key_column=doc.get("key_column", str, required=True),
        event_id_column=doc.get("event_id_column", str, required=True),
        event_time_column=doc.get("event_time_column", str),
        value_format=doc.get("value_format", str, default="json"),
        value_column=doc.get("value_column", str),
        value_columns=_parse_names(doc, "value_columns"),
        partition_column=doc.get("partition_column", str),
        headers_column=doc.get("headers_column", str),
        raw_timestamp_column=doc.get("raw_timestamp_column", str),
        headers=doc.get("headers", dict, default={}),
        ordering=doc.get("ordering", str, default="entity"),
        progress=_parse_progress(progress) if progress else Progress(),
        result_uri=doc.get("result_uri", str),
        max_partition_multiple=doc.get("max_partition_multiple", int),
        decrypt=_parse_decrypt(doc.nested("decrypt")),
        partitioner=doc.get("partitioner", str, default=DEFAULT_PARTITIONER),
        timestamp=doc.get("timestamp", str, default="replay"),
        delivery=doc.get("delivery", str, default="idempotent"),
        on_error=doc.get("on_error", str, default="fail"),
        dlq_topic=doc.get("dlq_topic", str),
        dlq_retention_ms=doc.get("dlq_retention_ms", int),
        mode=doc.get("mode", str, default="replay"),
        reconcile=_parse_reconcile(doc.nested("reconcile")),
        control=_parse_control(doc.nested("control")),
        ramp=_parse_ramp(doc.nested("ramp")),
        max_bytes_per_s=doc.get("max_bytes_per_s", int),
        shape=_parse_shape(doc.nested("shape")),
        where=_parse_where(doc.get("where", dict)),
        erasures=_parse_erasures(doc.nested("erasures")),
        keys_file=_parse_keys_file(doc.nested("keys_file")),
        repair=_parse_repair(doc.nested("repair")),
        redrive=_parse_redrive(doc.nested("redrive")),
        executor=_parse_executor(doc.nested("executor")),
    )
    doc.done()
    return spec


def _parse_control(doc: _Fields | None) -> Control | None:
    """The ``control`` section (``None`` when absent): the control topic, where to read it from, and
    the rate changes made before the spec was written."""
    if doc is None:
        return None
    changes: list[RateChange] = []
    for index, item in enumerate(doc.get("changes", list, default=[])):
        change = _Fields(item, doc.path(f"changes.{index}"))
        changes.append(
            RateChange(
                at=float(change.get("at", (int, float), required=True)),
                tps=change.get("tps", int, required=True),
                paused=change.get("paused", bool, default=False),
            )
        )
        change.done()
    control = Control(
        topic=doc.get("topic", str, required=True),
        offset=doc.get("offset", int, required=True),
        changes=tuple(changes),
        key=doc.get("key", str),
    )
    doc.done()
    return control


def _parse_shape(doc: _Fields | None) -> Shape | None:
    """The ``shape`` section (``None`` when absent): the speed-up and where scaled time starts."""
    if doc is None:
        return None
    shape = Shape(
        speed=float(doc.get("speed", (int, float), required=True)),
        origin=float(doc.get("origin", (int, float), required=True)),
    )
    doc.done()
    return shape


def _parse_executor(doc: _Fields | None) -> Executor | None:
    """The ``executor`` section (``None`` when absent): the source's executor cores and memory."""
    if doc is None:
        return None
    executor = Executor(cores=doc.get("cores", int), memory=doc.get("memory", str))
    doc.done()
    return executor


def _parse_keys_file(doc: _Fields | None) -> KeysFile | None:
    """The ``keys_file`` section (``None`` when absent): the file, the column its keys name, the digest."""
    if doc is None:
        return None
    keys_file = KeysFile(
        path=doc.get("path", str, required=True),
        column=doc.get("column", str, required=True),
        digest=doc.get("digest", str, required=True),
    )
    doc.done()
    return keys_file


def _parse_erasures(doc: _Fields | None) -> Erasures | None:
    """The ``erasures`` section (``None`` when absent): the list, its columns and the version honoured."""
    if doc is None:
        return None
    erasures = Erasures(
        path=doc.get("path", str, required=True),
        format=doc.get("format", str, required=True),
        column=doc.get("column", str, required=True),
        key=doc.get("key", str, required=True),
        erased_at=doc.get("erased_at", str, required=True),
        as_of=_parse_time(doc, "as_of") if doc.get("as_of", str) is not None else None,
    )
    doc.done()
    if erasures.format not in ("parquet", "csv"):
        raise SpecError("erasures.format", f"must be parquet or csv, not {erasures.format!r}")
    return erasures


def _parse_where(document: dict[str, Any] | None) -> RowFilter | None:
    """The ``where`` tree (``None`` when absent), read back and checked node by node."""
    return RowFilter(document) if document is not None else None


def _parse_ramp(doc: _Fields | None) -> Ramp | None:
    """The ``ramp`` section (``None`` when absent): how long, and the share of the rate it starts at."""
    if doc is None:
        return None
    ramp = Ramp(
        seconds=doc.get("seconds", int, required=True),
        start=float(doc.get("start", (int, float), required=True)),
    )
    doc.done()
    return ramp


def _parse_reconcile(doc: _Fields | None) -> ReconcileTarget | None:
    """The ``reconcile`` section (``None`` when absent): which run, and its offset ranges if known."""
    if doc is None:
        return None
    offsets = doc.nested("offsets")
    target = ReconcileTarget(
        run_id=doc.get("run_id", str, required=True),
        offsets=_parse_offsets(offsets) if offsets is not None else None,
        dlq_topic=doc.get("dlq_topic", str),
        also=_run_ids(doc, "also"),
    )
    doc.done()
    return target


def _run_ids(doc: _Fields, key: str, *, required: bool = False) -> tuple[str, ...]:
    ids = doc.get(key, list, required=required) or []
    if not all(isinstance(run_id, str) and run_id for run_id in ids):
        raise SpecError(doc.path(key), "must be a list of run ids")
    return tuple(ids)


def _parse_redrive(doc: _Fields | None) -> Redrive | None:
    """The ``redrive`` section (``None`` when absent): whose dead letters, where, and who set them aside."""
    if doc is None:
        return None
    redrive = Redrive(
        of=doc.get("of", str, required=True),
        dlq_topic=doc.get("dlq_topic", str, required=True),
        runs=_run_ids(doc, "runs", required=True),
    )
    doc.done()
    if redrive.of not in redrive.runs:
        raise SpecError("redrive.runs", "must name the run whose dead letters are sent back")
    return redrive


def _parse_repair(doc: _Fields | None) -> Repair | None:
    """The ``repair`` section (``None`` when absent): the repaired run, and the runs whose records count."""
    if doc is None:
        return None
    repair = Repair(of=doc.get("of", str, required=True), runs=_run_ids(doc, "runs", required=True))
    doc.done()
    if repair.of not in repair.runs:
        raise SpecError("repair.runs", "must name the repaired run")
    return repair


def _parse_offsets(doc: _Fields) -> OffsetRanges:
    topic = doc.get("topic", str, required=True)
    partitions: dict[int, tuple[int, int]] = {}
    for key, bounds in doc.get("partitions", dict, required=True).items():
        valid = isinstance(bounds, list) and len(bounds) == 2
        if not key.isdigit() or not valid or not all(type(bound) is int for bound in bounds):
            raise SpecError(doc.path(f"partitions.{key}"), "must be a partition number with [lo, hi] offsets")
        partitions[int(key)] = (bounds[0], bounds[1])
    doc.done()
    return OffsetRanges(topic, partitions)


def _parse_source(doc: _Fields) -> Source:
    source = Source(
        name=doc.get("name", str, required=True),
        path=doc.get("path", str),
        table=doc.get("table", str),
        format=doc.get("format", str, default="parquet"),
        snapshot=doc.get("snapshot", str),
        files=_files(doc),
    )
    doc.done()
    return source


def _files(doc: _Fields) -> tuple[str, ...] | None:
    files = doc.get("files", list)
    if files is None:
        return None
    if not all(isinstance(file, str) for file in files):
        raise SpecError(doc.path("files"), "must be a list of paths")
    return tuple(files)


def _parse_selection(window: _Fields | None, watermark: _Fields | None, commits: _Fields | None) -> Selection:
    if sum(part is not None for part in (window, watermark, commits)) != 1:
        raise SpecError("window", "give exactly one of 'window', 'watermark' or 'commits'")
    if commits is not None:
        selection: Selection = CommitRange(
            low=commits.get("low", str), high=commits.get("high", str, required=True)
        )
        commits.done()
        return selection
    if watermark is not None:
        selection = WatermarkRange(
            column=watermark.get("column", str, required=True),
            low=watermark.get("low", (str, int, float)),
            high=watermark.get("high", (str, int, float)),
        )
        watermark.done()
        return selection
    assert window is not None
    column = window.get("column", str, required=True)
    if "start_day" in window.document or "end_day" in window.document:
        selection = DayWindow(
            column,
            _parse_day(window, "start_day"),
            _parse_day(window, "end_day"),
        )
    else:
        selection = TimeWindow(column, _parse_time(window, "start"), _parse_time(window, "end"))
    window.done()
    return selection


def _parse_progress(doc: _Fields) -> Progress:
    progress = Progress(
        topic=doc.get("topic", str, default="replay.progress"),
        interval_s=float(doc.get("interval_s", (int, float), default=10.0)),
    )
    doc.done()
    return progress


def _parse_decrypt(doc: _Fields | None) -> Decrypt | None:
    """The ``decrypt`` section (``None`` when absent); its rules are checked by the model."""
    if doc is None:
        return None
    columns = doc.get("columns", list, required=True)
    keys: dict[str, DataKeyRef] = {}
    for key_id, body in (doc.get("data_keys", dict, required=True)).items():
        entry = type(doc)(body, doc.path(f"data_keys.{key_id}"))
        keys[key_id] = DataKeyRef(
            encrypted=entry.get("encrypted", str, required=True),
            key_ref=entry.get("key_ref", str, required=True),
        )
        entry.done()
    kms_doc = doc.nested("kms")
    kms = KmsSettings()
    if kms_doc is not None:
        kms = KmsSettings(region=kms_doc.get("region", str), endpoint_url=kms_doc.get("endpoint_url", str))
        kms_doc.done()
    decrypt = Decrypt(
        columns=tuple(columns),
        data_keys=keys,
        kms=kms,
        local_key_dir=doc.get("local_key_dir", str),
    )
    doc.done()
    return decrypt


def _parse_names(doc: _Fields, key: str) -> tuple[str, ...] | None:
    """A list of column names (``None`` when absent); each must be a string."""
    names = doc.get(key, list)
    if names is None:
        return None
    if not all(isinstance(name, str) for name in names):
        raise SpecError(doc.path(key), "must be a list of column names")
    return tuple(names)


def _parse_day(doc: _Fields, key: str) -> date:
    text = doc.get(key, str, required=True)
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise SpecError(doc.path(key), f"not an ISO day (YYYY-MM-DD): {text!r}") from exc


def _parse_time(doc: _Fields, key: str) -> datetime:
    text = doc.get(key, str, required=True)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise SpecError(doc.path(key), f"not an ISO timestamp: {text!r}") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _names(kinds: tuple[type, ...]) -> str:
    words = {str: "a string", int: "an integer", float: "a number", dict: "an object", bool: "a boolean"}
    return " or ".join(words.get(kind, kind.__name__) for kind in kinds)
