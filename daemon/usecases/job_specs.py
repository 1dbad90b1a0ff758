"""Turn a stored run and its catalog source into the publisher's job spec.

The run row keeps the window as resolved UTC bounds and, in its options, the window's kind: whole
days become a partition-column window (so Spark prunes partitions), a range a half-open event-time
window, a pipeline slot a watermark range or the commits it follows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import date, datetime, timedelta

from daemon.config.settings import Settings
from daemon.core.errors import BadRequest
from daemon.core.grammar.predicates import parse_predicate, predicate_document
from daemon.core.rate_shape import MEGABYTE, RAMP_FROM
from daemon.core.run_control import RateChange as CoreRateChange
from daemon.core.run_control import changes_from
from daemon.core.run_options import WindowKind
from daemon.core.states import RunKind
from daemon.usecases.catalog import Catalog
from daemon.usecases.catalog import Source as CatalogSource
from daemon.usecases.dead_letters import dead_letter_options, dead_letter_retention_ms
from daemon.usecases.pii import decrypt_section
from spark_job.spec.model import (
    DEAD_LETTER_HEADERS,
    DEAD_LETTER_ID,
    DEAD_LETTER_KEY,
    DEAD_LETTER_TIME,
    DEAD_LETTER_VALUE,
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
from store.models import Run


def job_rate_changes(changes: Iterable[CoreRateChange]) -> tuple[RateChange, ...]:
    """The daemon's rate changes as the job reads them: the one mapping across the job seam (the core
    imports no job, the job imports no daemon; ``tests/usecases/test_job_seam.py`` holds it both ways)."""
    return tuple(RateChange(at=c.at, tps=c.tps, paused=c.paused) for c in changes)


def job_selection(run: Run, partition_column: str, event_time_column: str) -> Selection:
    """The run's rows as the job selects them: the other mapping across the seam (windows are stored as
    the UTC bounds ``daemon.core.windows.bounds`` made; whole days go back to days on the partition
    column)."""
    if run.options.window == WindowKind.COMMITS:
        assert run.watermark_high is not None, "a commits slot reads up to its snapshot"
        return CommitRange(low=run.watermark_low, high=run.watermark_high)
    if run.watermark_column is not None:
        return WatermarkRange(column=run.watermark_column, low=run.watermark_low, high=run.watermark_high)
    assert run.window_start is not None and run.window_end is not None, "a replay run has a window"
    start, end = run.window_start, run.window_end
    if run.options.window == WindowKind.DAYS:
        last: date = (end - timedelta(days=1)).date()
        return DayWindow(column=partition_column, start_day=start.date(), end_day=last)
    return TimeWindow(column=event_time_column, start=start, end=end)


def _job_kafka(settings: Settings, cluster: str) -> dict[str, str | int | float | bool]:
    """The cluster's client settings (its topics, dead letters, progress and control are there) and
    the producer tuning every run shares."""
    config: dict[str, str | int | float | bool] = dict(settings.kafka_config(cluster))
    if settings.kafka_message_timeout_ms is not None:
        config["message.timeout.ms"] = settings.kafka_message_timeout_ms
    config.update(settings.kafka_producer)  # over the job's defaults (spark_job.kafka_conf)
    return config


def _reconcile_target(run: Run) -> ReconcileTarget | None:
    """A reconcile run's subject and the offset ranges its records lie in (None: the whole topic)."""
    if run.kind != RunKind.RECONCILE:
        return None
    assert run.reconciles is not None, "a reconcile run names the run it checks"
    offsets = None
    if run.offsets and not run.options.repairs:  # a repaired run's records lie beyond its own ranges
        offsets = OffsetRanges(
            topic=str(run.offsets["topic"]),
            partitions={int(p): (int(lo), int(hi)) for p, (lo, hi) in run.offsets["partitions"].items()},
        )
    return ReconcileTarget(
        run_id=run.reconciles, offsets=offsets, dlq_topic=run.options.dlq_topic, also=run.options.repairs
    )


def _control(run: Run, settings: Settings, offset: int | None) -> Control | None:
    """Where a throttled replay's tasks learn of rate changes, and the changes made so far.

    ``offset`` is the control topic's end, taken *before* ``run`` was read from the store: a change is
    either in ``run.control`` or on the topic at or after ``offset``. None: the job has a fixed rate.
    """
    if offset is None or run.kind == RunKind.RECONCILE or run.tps <= 0:
        return None
    return Control(
        topic=settings.control_topic,
        offset=offset,
        changes=job_rate_changes(changes_from(run.control)),
        key=run.control_key,
    )


def build_spec(
    run: Run,
    *,
    catalog: Catalog,
    settings: Settings,
    result_uri: str | None,
    control_offset: int | None = None,
) -> JobSpec:
    """``control_offset``: the control topic's end offset, read before ``run`` (None: no live control)."""
    source = catalog.get(run.source)
    options = run.options
    if source.table.table is not None and options.table_metadata is None:  # the job has no catalog
        raise BadRequest(
            f"run {run.id} was planned when source '{source.name}' was a table at a path; it is now "
            f"{source.table.table} in a catalog: replay the window again to plan on the named table"
        )
    # recorded when the run was created; None (a pipeline created without on_error=) takes the source's
    dead_letters = dead_letter_options(options.on_error or source.on_error, source.name)
    spec = JobSpec(
        run_id=run.id,
        source=Source(
            name=source.name,
            # a table named in a catalog is read from the metadata file its plan recorded
            path=options.table_metadata or source.table.path,
            format=source.table.format,
            snapshot=options.snapshot,
            files=options.files,
        ),
        selection=job_selection(run, source.partition_column, source.event_time_column),
        topic=run.topic,
        kafka=_job_kafka(settings, options.cluster),
        tps=run.tps,
        key_column=source.key_column,
        event_id_column=source.event_id_column,
        event_time_column=source.event_time_column,
        value_format=source.value_format,
        value_columns=_value_columns(run, source.value_columns),
        partition_column=source.partition_column,
        value_column=source.raw.value_column if source.raw else None,
        headers_column=source.raw.headers_column if source.raw else None,
        raw_timestamp_column=source.raw.timestamp_column if source.raw else None,
        headers=dict(options.headers),
        ordering=options.ordering,
        progress=Progress(topic=settings.progress_topic, interval_s=settings.progress_interval_s),
        result_uri=result_uri,
        decrypt=decrypt_section(source, settings, read_at=options.table_metadata),
        partitioner=source.partitioner,
        timestamp=options.timestamp or source.timestamp,
        delivery=options.delivery,
        executor=(
            Executor(cores=source.executor.cores, memory=source.executor.memory) if source.executor else None
        ),
        on_error="dlq" if dead_letters["on_error"] == "dlq" else "fail",
        dlq_topic=options.dlq_topic or dead_letters["dlq_topic"],
        dlq_retention_ms=dead_letter_retention_ms(
            settings.topic_retention_ms, timedelta(hours=settings.replay_topic_ttl_hours)
        ),
        mode="reconcile" if run.kind == RunKind.RECONCILE else "replay",
        reconcile=_reconcile_target(run),
        control=_control(run, settings, control_offset),
        ramp=_ramp(run),
        max_bytes_per_s=_byte_ceiling(run),
        shape=_shape(run),
        where=_row_filter(run),
        erasures=_erasures(run, source),
        repair=_repair(run),
        keys_file=_keys_file(run, source.key_column),
    )
    return _as_redrive(spec, run) if run.options.redrive_of is not None else spec


def _as_redrive(spec: JobSpec, run: Run) -> JobSpec:
    """``redrive r-…``: the rows are the subject's dead letters (``spark_job.redrive``), published as
    the raw bytes they are, at publish time, a record that fails again set aside again; the source's
    erasure list still applies, by the record's key."""
    subject = run.options.redrive_of
    assert subject is not None and spec.dlq_topic is not None, "a redrive reads its subject's dead letters"
    erasures = spec.erasures
    return replace(
        spec,
        key_column=DEAD_LETTER_KEY,
        event_id_column=DEAD_LETTER_ID,
        event_time_column=DEAD_LETTER_TIME,
        value_format="raw",
        value_columns=None,
        value_column=DEAD_LETTER_VALUE,
        headers_column=DEAD_LETTER_HEADERS,
        raw_timestamp_column=None,
        decrypt=None,
        timestamp="replay",
        on_error="dlq",
        delivery="idempotent",  # a record refused again goes back to the dead-letter topic
        where=None,
        keys_file=None,
        shape=None,
        erasures=None if erasures is None else replace(erasures, column=DEAD_LETTER_KEY),
        redrive=Redrive(of=subject, dlq_topic=spec.dlq_topic, runs=(subject, *run.options.redrives)),
    )


def _value_columns(run: Run, columns: list[str] | None) -> tuple[str, ...] | None:
    """``fields=``: the run's own projection of the value; else the source's (None: all but the
    partition column)."""
    if run.options.fields:
        return tuple(run.options.fields)
    return None if columns is None else tuple(columns)


def _erasures(run: Run, source: CatalogSource) -> Erasures | None:
    """The source's erasure list, always (a run planned before the list was named honours it too),
    pinned to the version the run's plan read (a reconcile: the one its subject honoured)."""
    listed = source.erasures
    if listed is None:
        return None
    as_of = run.options.erasures_as_of
    return Erasures(
        path=listed.path,
        format=listed.format,
        column=listed.column or source.key_column,
        key=listed.key,
        erased_at=listed.erased_at,
        as_of=None if as_of is None else datetime.fromisoformat(as_of),
    )


def _keys_file(run: Run, key_column: str) -> KeysFile | None:
    """``keys=@<file>``: the file, and the digest of the keys the plan read from it."""
    path, digest = run.options.keys_file, run.options.keys_digest
    if path is None or digest is None:
        return None
    return KeysFile(path=path, column=key_column, digest=digest)


def _repair(run: Run) -> Repair | None:
    """``repair r-…``: the repaired run and its earlier repairs, whose records already count."""
    repaired = run.options.repair_of
    if repaired is None or run.kind == RunKind.RECONCILE:
        return None
    return Repair(of=repaired, runs=(repaired, *run.options.repairs))


def _row_filter(run: Run) -> RowFilter | None:
    """``where=``: the stored canonical text, read again into the job's document (for a reconcile,
    its subject's filter: the ids it expects are the ones that filter kept)."""
    if run.options.where is None:
        return None
    return RowFilter(predicate_document(parse_predicate(run.options.where)))


def _shape(run: Run) -> Shape | None:
    """``tps=original``: the speed-up, from the window's start (a pipeline's slots are never shaped)."""
    speed = run.options.speed
    if speed is None or run.kind == RunKind.RECONCILE or run.tps <= 0 or run.window_start is None:
        return None
    return Shape(speed=speed, origin=run.window_start.timestamp())


def _byte_ceiling(run: Run) -> int | None:
    """``max_mb`` in bytes a second, for a run that paces (an unthrottled or reconcile run has none)."""
    max_mb = run.options.max_mb
    if max_mb is None or run.kind == RunKind.RECONCILE or run.tps <= 0:
        return None
    return max_mb * MEGABYTE


def _ramp(run: Run) -> Ramp | None:
    """The run's warm-up, from the share of its rate every ramp starts at (``daemon.core.rate_shape``)."""
    ramp_s = run.options.ramp_s
    if ramp_s is None or run.kind == RunKind.RECONCILE or run.tps <= 0:
        return None
    return Ramp(seconds=ramp_s, start=RAMP_FROM)
