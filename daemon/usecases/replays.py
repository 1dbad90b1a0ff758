"""The Replay Service's use cases: plan, create, inspect, cancel (one facade, hence over 400 lines).

Validation happens before anything is created, in this order: the caps on unfinished runs (a create
only), source, authorization, window, rate, options, topic, rows, and the ETA against the launcher's
execution timeout. A refused request leaves only an audit entry behind. An accepted one creates its
topic and its `queued` run; launching is the watcher's job, so a crash between the two is harmless.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cache

import structlog
from sqlalchemy.exc import IntegrityError

from daemon.config.settings import Settings
from daemon.core.authz import may_cancel_run, may_use_source, vouched_fields_refused
from daemon.core.auto_rate import AutoRate
from daemon.core.clusters import DEFAULT_CLUSTER
from daemon.core.errors import (
    BadRequest,
    CapReached,
    Conflict,
    EmptyWindow,
    Forbidden,
    OverlappingReplay,
    ReplayError,
    ReusedIdempotencyKey,
)
from daemon.core.grammar import (
    TRANSACTIONAL_DLQ,
    Delivery,
    OnError,
    Ordering,
    PlanCommand,
    ReplayCommand,
    Timestamp,
    Topic,
    render,
)
from daemon.core.grammar.predicates import And, Predicate, render_predicate
from daemon.core.ids import new_run_id
from daemon.core.quantities import partitions_for_rate
from daemon.core.queue_wait import places_in_line
from daemon.core.reconcile import IdList
from daemon.core.run_options import RunOptions, WindowKind
from daemon.core.states import RunKind, RunState
from daemon.core.windows import DayWindow, TimeWindow, bounds, days, label, resolve
from daemon.usecases.audit import Audit
from daemon.usecases.catalog import Catalog, Source, TableRef
from daemon.usecases.dead_letters import dead_letter_options
from daemon.usecases.eta import Eta, check_execution_limit, estimate, waiting
from daemon.usecases.live_approval import check_live_approval
from daemon.usecases.ports import Clusters, ErasureVersion, KeyList, TableStats, TopicAdmin, WindowRows
from daemon.usecases.selection import check_fields, key_filter, selection_of
from daemon.usecases.table_runtime import check_table_runtime
from spark_job.publish.time_shape import Shaped, bucket_width, shape
from store import Store
from store.live_guard import LiveGuard
from store.models import Run, VerdictId

log = structlog.get_logger(__name__)

MAX_PINNED_FILES = 10_000  # a Parquet run's listing kept in its options (about 100 bytes a file)

# What run lists show: reconcile runs are read through the run they check.
_LISTED_KINDS = (RunKind.REPLAY, RunKind.PIPELINE)
# What a person's cap counts: the runs they asked for (a pipeline's scheduled runs are its own).
_ASKED_KINDS = (RunKind.REPLAY, RunKind.RECONCILE)

TYPICAL_RECORD_BYTES = 512


@dataclass(frozen=True)
class Overlap:
    """A going or recently succeeded live replay that a new one would publish again."""

    run_id: str
    requester: str
    state: str
    window: str


@dataclass(frozen=True)
class Plan:
    """What a replay would do; the dry run's answer and the run's announcement."""

    source: str
    window: str
    window_start: datetime
    window_end: datetime
    rows: int
    tps: int
    eta: Eta  # start-up (learned from the launcher's recent runs) + rows / tps + wind-down
    topic: str
    topic_mode: Topic
    partitions: int
    workers: int
    window_kind: WindowKind = WindowKind.RANGE  # how the job selects: whole days, or an event-time range
    relative: bool = False  # written relative to now (or in a zone): a retry pins these bounds
    headers: dict[str, str] = field(default_factory=dict)
    ordering: Ordering = "entity"
    timestamp: Timestamp = "replay"  # resolved: the run's option, else the source's default
    on_error: OnError = "fail"  # resolved: the run's option, else the source's default
    delivery: Delivery = "idempotent"  # resolved: the run's option, else the source's default
    cluster: str = DEFAULT_CLUSTER  # the Kafka cluster of the topic: the source's
    force: bool = False
    overlapping: tuple[Overlap, ...] = ()  # live topic only: refused unless force
    live_approvals: int = 1
    rewind_instead: str | None = None  # the window is still on the live topic: this rewind re-delivers it
    watch: tuple[str, ...] = ()  # consumer groups whose drain the run watches after it ends
    auto: AutoRate | None = None  # tps=auto: ``tps`` is the start rate, the daemon steers from there
    ramp_s: int | None = None  # ramp=: from a tenth of the rate up to all of it over these seconds
    max_mb: int | None = None  # max_mb=: a byte ceiling beside the rate (the plan cannot know sizes)
    # tps=original: the speed-up, and what the window's own times give under the ceiling ``tps``
    speed: float | None = None
    shaped: Shaped | None = None
    snapshot: str | None = None  # the table version counted, which the run will read (None: Parquet)
    table_metadata: str | None = None  # a table named in a catalog: the metadata file the run reads
    files: tuple[str, ...] | None = None  # a Parquet table: the window's files counted, which the run reads
    where: Predicate | None = None  # where=, keys= and types= as one filter: what ``rows`` counted
    fields: tuple[str, ...] = ()  # fields=: the value's columns; (): the source's
    erasures: ErasureVersion | None = None  # the source's erasure list as the plan read it; None: none
    erasures_path: str | None = None  # where that list is
    keys_file: str | None = None  # keys=@<file>: the key file the plan read
    keys: KeyList | None = None  # and its keys, pinned by their digest


@dataclass(frozen=True)
class SourceTable:
    """A source with its table's current version, as `/replay sources` shows it."""

    source: Source
    snapshot: str | None  # the current snapshot id or version; None for Parquet or when unreadable
    unreadable: str | None = None  # why the table's version could not be read


class _AlreadyCreated(Exception):
    """Internal: an identical request (same Idempotency-Key) created the run first."""

    def __init__(self, run: Run) -> None:
        super().__init__(run.id)
        self.run = run


def _same_request(run: Run, request: str, key: str) -> Run:
    """The run a retried request gets back, once it is sure the retry asks for the same thing."""
    first = run.options.request
    if first is not None and first != request:
        raise ReusedIdempotencyKey(
            f"Idempotency-Key '{key}' was used for `{first}` (run {run.id}); this request is `{request}`: "
            "send a new key for a new request"
        )
    return run


def _parts(predicate: Predicate) -> tuple[Predicate, ...]:
    return predicate.parts if isinstance(predicate, And) else (predicate,)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


def resolved_delivery(command: ReplayCommand | PlanCommand, source: Source) -> Delivery:
    """The run's option, else the source's default; a transactional run sets no record aside (its
    dead letters would go outside the transactions), whichever of the two asked for what."""
    delivery = command.delivery or source.delivery
    if delivery == "transactional" and (command.on_error or source.on_error) == "dlq":
        raise BadRequest(TRANSACTIONAL_DLQ)
    return delivery


def auto_topic_name(source: str, run_id: str) -> str:
    return f"replay.{source}.{run_id}"


class ReplayService:
    def __init__(
        self,
        *,
        settings: Settings,
        catalog: Catalog,
        store: Store,
        topics: Clusters[TopicAdmin],
        table_stats: TableStats,
        clock: Callable[[], datetime],
        wake_watcher: Callable[[], None] = lambda: None,
        rewind_hint: Callable[[str, datetime, str], str | None] | None = None,
        launch_slots: int | None = None,
        warm: Callable[[int], bool | None] = lambda workers: None,
    ) -> None:
        self._warm = warm  # would a run of N workers start warm now (Launcher.warm)
        self._rewind_hint = rewind_hint  # (live topic, window start, cluster) -> a rewind, if retained
        self._launch_slots = launch_slots  # the launcher's jobs at once (None: no limit): the ETA's wait
        self._settings = settings
        self._catalog = catalog
        self._store = store
        self._topics = topics
        self._table_stats = table_stats
        self._clock = clock
        self._wake_watcher = wake_watcher
        self._audit = Audit(store)

    # -- authorization and audit -------------------------------------------------------------

    def _authorize_source(self, actor: str, source: Source) -> None:
        if not may_use_source(actor, source_owners=source.owners, admins=self._settings.admins):
            owners = ", ".join(f"<@{owner}>" for owner in source.owners)
            raise Forbidden(
                f"only the owners of '{source.name}' ({owners}) or a platform admin may replay it"
            )

    def _check_caps(self, actor: str) -> None:
        """Refuse a new run over a cap on unfinished runs, before anything is read or created. Admins
        are held by the total cap only; pipelines' scheduled runs are never refused (ADR 0017)."""
        settings = self._settings
        if actor not in settings.admins:
            mine = self._store.runs.unfinished_count(requester=actor, kinds=_ASKED_KINDS)
            if mine >= settings.max_active_runs_per_user:
                raise CapReached(
                    f"<@{actor}> already has {mine} unfinished runs, the most one person may have "
                    f"(REPLAY_MAX_ACTIVE_RUNS_PER_USER={settings.max_active_runs_per_user}): wait for one "
                    "to end or cancel one, then ask again"
                )
        everyone = self._store.runs.unfinished_count()
        if everyone >= settings.max_active_runs:
            raise CapReached(
                f"the platform already has {everyone} unfinished runs, its limit "
                f"(REPLAY_MAX_ACTIVE_RUNS={settings.max_active_runs}): try again once some have ended"
            )

    def _check_reconcile_cap(self, actor: str) -> None:
        """A reconcile reads a whole run's records back from its topic: one person's are few."""
        if actor in self._settings.admins:
            return
        cap = self._settings.max_reconciles_per_user
        mine = self._store.runs.unfinished_count(requester=actor, kinds=(RunKind.RECONCILE,))
        if mine >= cap:
            raise CapReached(
                f"<@{actor}> already has {mine} unfinished reconciles, the most one person may have "
                f"(REPLAY_MAX_RECONCILES_PER_USER={cap}): ask again once it has a verdict"
            )

    def _execution_limit(self) -> tuple[float | None, str]:
        """The launcher's execution timeout in seconds (None: none) and the setting that sets it."""
        if self._settings.launcher == "emr":
            return (
                self._settings.emr.execution_timeout_minutes * 60.0,
                "REPLAY_EMR__EXECUTION_TIMEOUT_MINUTES",
            )
        return None, ""

    # -- planning --------------------------------------------------------------------------

    def _plan(self, actor: str, command: ReplayCommand | PlanCommand) -> tuple[Source, Plan]:
        source = self._catalog.get(command.source)
        self._authorize_source(actor, source)
        window = resolve(command.window, self._clock(), command.tz)
        written = label(command.window, command.tz) + (f" tz={command.tz}" if command.tz else "")
        start, end = bounds(window)
        tps = command.tps if command.tps is not None else self._settings.default_tps
        if command.auto is not None:  # the daemon steers it from a start well under the ceiling
            if command.topic != "live":
                raise BadRequest(
                    "tps=auto steers from the group's lag on the topic it reads: replay with topic=live"
                    " (a new topic has no consumers, so the rate would never leave its start)"
                )
            if command.auto.ceiling > self._settings.max_tps:
                raise BadRequest(
                    f"max={command.auto.ceiling} is above this platform's maximum of {self._settings.max_tps}"
                )
            tps = command.auto.start
        if tps <= 0:
            raise BadRequest(f"tps must be at least 1, got {tps}")
        if tps > self._settings.max_tps:
            raise BadRequest(f"tps={tps} is above this platform's maximum of {self._settings.max_tps}")
        workers = command.workers or self._settings.local_workers
        if workers > self._settings.max_workers:
            raise BadRequest(f"workers={workers} is above the maximum of {self._settings.max_workers}")
        if command.ordering == "entity" and not source.key_column:
            raise BadRequest(f"source '{source.name}' has no entity key column for ordering=entity")
        check_table_runtime(source, self._settings)
        with self._catalog.blaming_table(source):  # a table that is not there, or not of its format
            table_metadata = self._table_stats.metadata_file(source.table)  # the one ask of a catalog
            table = source.table.read_at(table_metadata)
            snapshot = self._table_stats.snapshot(table)
            columns = self._table_stats.column_names(table)
        if command.snapshot is not None:  # checked by the first count at it: a missing one says so
            if snapshot is None:
                raise BadRequest(
                    f"snapshot={command.snapshot}: the table of '{source.name}' is {source.table.format}, "
                    "which has no snapshots; snapshot= reads an Iceberg or Delta table as it was"
                )
            snapshot = command.snapshot
        source.check_columns(columns, catalog_path=self._catalog.path)  # before anything is counted
        # before any count: a selection the table cannot answer says so (its schema read once)
        kinds = cache(lambda: self._table_stats.column_kinds(table))
        where = None
        if command.where is not None or command.keys or command.types:
            where = selection_of(source, command, kinds())
        counted = where  # and a key file's keys: what the plan counts and the shape follows
        keys = None
        if command.keys_file is not None:  # read and pinned now; counted with the rest of the selection
            keys = self._table_stats.key_list(command.keys_file)
            listed = key_filter(source, keys.keys, kinds())
            counted = listed if where is None else And((*_parts(where), listed))
        if command.fields:
            check_fields(source, command.fields, columns)
        erasures = self._erasures(source, table)
        # a Parquet table has no snapshot: the files listed now are what is counted and what is read
        files = (
            None
            if snapshot is not None
            else self._table_stats.window_files(table, source.partition_column, days(window))
        )
        if files is not None and len(files) > MAX_PINNED_FILES:  # kept in every row of the run's family
            log.info(
                "too many files in the window to pin: the job lists them when it runs",
                source=source.name,
                files=len(files),
            )
            files = None
        rows = self._count_rows(source, table, window, snapshot, counted, files)
        if rows == 0:
            kept = "" if where is None else f" that where={render_predicate(where)} keeps"
            kept += f" of the keys in {command.keys_file}" if command.keys_file else ""
            raise EmptyWindow(f"no rows of '{source.name}' in {written}{kept}; nothing to replay")
        overlapping: tuple[Overlap, ...] = ()
        if command.topic == "live":
            if source.live_topic is None:
                raise BadRequest(f"source '{source.name}' has no live topic; use topic=auto")
            live = self._topics[source.cluster].describe(source.live_topic)
            if live is None:
                raise BadRequest(
                    f"the live topic '{source.live_topic}' does not exist on the {source.cluster} cluster"
                )
            topic, partitions = source.live_topic, live.partitions
            overlapping = self._overlapping(source.name, topic, start, end, where)
        else:
            topic, partitions = auto_topic_name(source.name, "<run id>"), self._auto_partitions(source, tps)
        shaped = self._shaped(source, table, window, snapshot, command, tps, counted, files)
        publish_s = shaped.last_s if shaped else None
        eta = self.eta(rows, tps, ramp_s=command.ramp_s, publish_s=publish_s, workers=workers)
        limit_s, setting = self._execution_limit()
        check_execution_limit(eta, rows=rows, tps=tps, limit_s=limit_s, setting=setting)
        eta = waiting(self._store, eta, capacity=self._launch_slots, now=self._clock())
        hint = None
        if self._rewind_hint is not None and source.live_topic and isinstance(command, PlanCommand):
            hint = self._rewind_hint(source.live_topic, start, source.cluster)
        plan = Plan(
            source=source.name,
            window=written,
            window_start=start,
            window_end=end,
            rows=rows,
            tps=tps,
            eta=eta,
            topic=topic,
            topic_mode=command.topic,
            partitions=partitions,
            workers=workers,
            window_kind=WindowKind.DAYS if isinstance(window, DayWindow) else WindowKind.RANGE,
            relative=command.tz is not None or not isinstance(command.window, DayWindow | TimeWindow),
            headers=dict(command.headers),
            ordering=command.ordering,
            timestamp=command.timestamp or source.timestamp,
            on_error=command.on_error or source.on_error,
            delivery=resolved_delivery(command, source),
            cluster=source.cluster,
            force=command.force,
            overlapping=overlapping,
            live_approvals=source.live_approvals,
            rewind_instead=hint,
            watch=command.watch,
            auto=command.auto,
            ramp_s=command.ramp_s,
            max_mb=command.max_mb,
            speed=command.speed,
            shaped=shaped,
            snapshot=snapshot,
            table_metadata=table_metadata,
            files=files,
            where=where,
            fields=command.fields,
            erasures=erasures,
            erasures_path=source.erasures.path if source.erasures else None,
            keys_file=command.keys_file,
            keys=keys,
        )
        return source, plan

    def _guard_since(self) -> datetime:
        return self._clock() - timedelta(hours=self._settings.live_replay_guard_hours)

    def _overlapping(
        self, source: str, topic: str, start: datetime, end: datetime, where: Predicate | None
    ) -> tuple[Overlap, ...]:
        runs = self._store.runs.overlapping(
            source=source,
            topic=topic,
            start=start,
            end=end,
            since=self._guard_since(),
            where=None if where is None else render_predicate(where),
        )
        return tuple(Overlap(r.id, r.requester, str(r.state), r.window_label or "") for r in runs)

    def _check_approval(self, actor: str, source: Source, approved_by: str | None) -> None:
        check_live_approval(actor, source, approved_by, what="live replay")

    def _erasures(self, source: Source, table: TableRef) -> ErasureVersion | None:
        """The source's erasure list, read before anything is created: a run never goes without it."""
        if source.erasures is None:
            return None
        column = source.erasures.column or source.key_column
        if column not in self._table_stats.column_names(table):
            raise BadRequest(
                f"source '{source.name}': its erasure list names the column '{column}', which its "
                "table does not have (the catalog's erasures.column)"
            )
        return self._table_stats.erasure_version(source.erasures)

    def _count_rows(
        self,
        source: Source,
        table: TableRef,
        window: DayWindow | TimeWindow,
        snapshot: str | None,
        where: Predicate | None,
        files: tuple[str, ...] | None,
    ) -> int:
        """The window's rows in ``table`` (the source's, where its catalog put it) as of ``snapshot``
        (the one the run will read; or in ``files``, a Parquet table's listing) that ``where`` keeps."""
        rows = WindowRows(source.partition_column, days(window), filter=where, files=files)
        if isinstance(window, TimeWindow):
            start, end = bounds(window)
            rows = WindowRows(
                source.partition_column, days(window), source.event_time_column, start, end, where, files
            )
        return self._table_stats.count_window_rows(table, rows, snapshot=snapshot)

    def _auto_partitions(self, source: Source, tps: int) -> int:
        live = self._topics[source.cluster].describe(source.live_topic) if source.live_topic else None
        return live.partitions if live is not None else partitions_for_rate(tps, TYPICAL_RECORD_BYTES)

    def _shaped(
        self,
        source: Source,
        table: TableRef,
        window: DayWindow | TimeWindow,
        snapshot: str | None,
        command: ReplayCommand | PlanCommand,
        ceiling: int,
        where: Predicate | None,
        files: tuple[str, ...] | None,
    ) -> Shaped | None:
        """``tps=original``: the window's own times, scaled and served under ``ceiling``."""
        if command.speed is None:
            return None
        if not source.event_time_column:
            raise BadRequest(f"source '{source.name}' has no event time column for tps=original")
        start, end = bounds(window)
        width = bucket_width((end - start).total_seconds() / command.speed)
        rows = WindowRows(
            source.partition_column, days(window), source.event_time_column, start, end, where, files
        )
        counts = self._table_stats.time_histogram(
            table, rows, snapshot=snapshot, origin=start, speed=command.speed, width=width
        )
        return shape(counts, width, ceiling)

    def eta(
        self,
        rows: int,
        tps: int,
        *,
        ramp_s: int | None = None,
        publish_s: float | None = None,
        workers: int | None = None,
    ) -> Eta:
        """How long `rows` at `tps` (after a ramp of `ramp_s`; or `publish_s` of a shaped replay)
        take from the command to the final state on this daemon's launcher (warm or cold, as a run of
        `workers` would start now)."""
        return estimate(
            self._store,
            launcher_kind=self._settings.launcher,
            rows=rows,
            tps=tps,
            ramp_s=ramp_s,
            publish_s=publish_s,
            startup_default_s=self._settings.eta_startup_s,
            history=self._settings.eta_history_runs,
            warm=self._warm(workers) if workers is not None else None,
        )

    def plan(self, actor: str, command: PlanCommand) -> Plan:
        _, plan = self._audit.refusing(actor, "plan", command.source, lambda: self._plan(actor, command))
        self._audit.accepted(actor, "plan", command.source, rows=plan.rows, window=plan.window)
        return plan

    # -- creating ----------------------------------------------------------------------------

    def create_replay(
        self,
        actor: str,
        command: ReplayCommand,
        *,
        confirm_live: bool = False,
        approved_by: str | None = None,
        idempotency_key: str | None = None,
        slack_channel: str | None = None,
        vouched: bool = False,
    ) -> tuple[Run, bool]:
        """Validate, provision the topic, record a queued run. Returns (run, created).

        ``approved_by`` is the second owner who approved a live replay (``live_approvals: 2``) and
        ``slack_channel`` where its card goes; both only when ``vouched`` (the service credential: the
        bot saw the click). A refused approval is audited under the approver, before an earlier run
        could be handed back; a personal token naming one is refused under its own owner.
        """
        refusal = vouched_fields_refused(
            vouched=vouched, approved_by=approved_by, slack_channel=slack_channel
        )
        if refusal is not None:
            self._audit.refuse(actor, "replay", command.source, Forbidden(refusal))
        if approved_by is not None:
            self._audit.refusing(
                approved_by,
                "approve",
                command.source,
                lambda: self._check_approval(actor, self._catalog.get(command.source), approved_by),
                requester=actor,
            )
        request = render(command)  # canonical: the same request always renders the same
        if idempotency_key is not None:
            existing = self._store.runs.find_by_idempotency_key(actor, idempotency_key)
            if existing is not None:
                return _same_request(existing, request, idempotency_key), False

        def work() -> Run:
            self._check_caps(actor)
            source, plan = self._plan(actor, command)
            if command.topic == "live" and not confirm_live:
                raise Conflict(
                    f"publishing into the live topic '{plan.topic}' needs an explicit confirmation "
                    "(confirm_live=true)"
                )
            if command.topic == "live":
                self._check_approval(actor, source, approved_by)
            return self._provision_and_record(
                actor, source, plan, idempotency_key, slack_channel, approved_by, request
            )

        try:
            run = self._audit.refusing(actor, "replay", command.source, work)
        except _AlreadyCreated as raced:
            assert idempotency_key is not None, "only a keyed request can lose a race to itself"
            return _same_request(raced.run, request, idempotency_key), False
        honours = {"erasures": run.options.erasures, "erasures_as_of": run.options.erasures_as_of}
        self._audit.accepted(
            actor,
            "replay",
            run.id,
            source=run.source,
            window=run.window_label,
            tps=run.tps,
            **{name: value for name, value in honours.items() if value is not None},
        )
        if approved_by is not None:
            self._audit.accepted(approved_by, "approve", run.id, requester=actor, source=run.source)
        self._wake_watcher()
        return run, True

    def _provision_and_record(
        self,
        actor: str,
        source: Source,
        plan: Plan,
        idempotency_key: str | None,
        slack_channel: str | None,
        approved_by: str | None = None,
        request: str | None = None,
    ) -> Run:
        run_id = new_run_id()
        topic, created = plan.topic, False
        if plan.topic_mode == "auto":
            topic = auto_topic_name(source.name, run_id)
            self._topics[source.cluster].create(
                topic, partitions=plan.partitions, config=self._auto_topic_config(plan)
            )
            created = True
        try:
            return self._store.runs.create(
                run_id=run_id,
                kind="replay",
                source=source.name,
                topic=topic,
                topic_created=created,
                tps=plan.tps,
                requester=actor,
                window_start=plan.window_start,
                window_end=plan.window_end,
                window_label=plan.window,
                options=RunOptions(
                    window=plan.window_kind,
                    relative=plan.relative,
                    topic_mode=plan.topic_mode,
                    headers=dict(plan.headers),
                    ordering=plan.ordering,
                    timestamp=plan.timestamp,
                    delivery=plan.delivery,
                    cluster=source.cluster,
                    workers=plan.workers,
                    partitions=plan.partitions,
                    planned_rows=plan.rows,
                    planned_eta_s=round(plan.eta.total_s, 1),
                    request=request,  # the command as understood, canonical: what a key stands for
                    watch=tuple(plan.watch),
                    auto=plan.auto,
                    ramp_s=plan.ramp_s,
                    max_mb=plan.max_mb,
                    speed=plan.speed,
                    shaped_s=round(plan.shaped.last_s, 1) if plan.shaped is not None else None,
                    **dead_letter_options(plan.on_error, source.name),
                    overrides=tuple(o.run_id for o in plan.overlapping) if plan.force else (),
                    approved_by=approved_by,
                    snapshot=plan.snapshot,
                    table_metadata=plan.table_metadata,
                    files=plan.files,
                    where=None if plan.where is None else render_predicate(plan.where),
                    fields=plan.fields,
                    keys_file=plan.keys_file,
                    keys_digest=plan.keys.digest if plan.keys is not None else None,
                    erasures=source.erasures.path if source.erasures else None,
                    erasures_as_of=_iso(plan.erasures.as_of) if plan.erasures else None,
                ),
                idempotency_key=idempotency_key,
                slack_channel=slack_channel,
                live_guard=self._live_guard(plan),
            )
        except Exception as exc:
            if created:  # never leave a topic behind for a run that does not exist
                self._topics[source.cluster].delete(topic)
            # A concurrent retry of the same request (a double click) that won the race shows up as a
            # duplicate key or, on a live topic, as the overlapping run: either way it is this request's run.
            if isinstance(exc, IntegrityError | OverlappingReplay) and idempotency_key is not None:
                existing = self._store.runs.find_by_idempotency_key(actor, idempotency_key)
                if existing is not None:
                    raise _AlreadyCreated(existing) from exc
            raise

    def _live_guard(self, plan: Plan) -> LiveGuard | None:
        """Checked again in the insert's own transaction: the plan's answer may be stale by then."""
        if plan.topic_mode != "live" or plan.force:
            return None
        return LiveGuard(self._guard_since())

    def _auto_topic_config(self, plan: Plan) -> dict[str, str]:
        """Broker timestamps (LogAppendTime) prove the rate; ``timestamp=event`` needs CreateTime, and
        then retention counts from event time, so it is stretched to keep the oldest event as long."""
        retention_ms = self._settings.topic_retention_ms
        if plan.timestamp != "event":
            return {"message.timestamp.type": "LogAppendTime", "retention.ms": str(retention_ms)}
        age_ms = max(0, int((self._clock() - plan.window_start).total_seconds() * 1000))
        return {"message.timestamp.type": "CreateTime", "retention.ms": str(retention_ms + age_ms)}

    # -- reading and cancelling ------------------------------------------------------------

    def get(self, run_id: str) -> Run:
        return self._store.runs.get(run_id)

    def listed(self, run_id: str) -> dict[IdList, int]:
        """How many ids each of the run's verdict lists holds (RunNotFound for an unknown run)."""
        self._store.runs.get(run_id)
        return self._store.verdict_ids.counts(run_id)

    def listed_page(
        self, run_id: str, kind: IdList, *, after: int = -1, limit: int = 500
    ) -> builtins.list[VerdictId]:
        """One slice of a verdict list, in the job's order: the ids after place ``after``."""
        self._store.runs.get(run_id)
        return self._store.verdict_ids.page(run_id, kind, after=after, limit=limit)

    def listed_all(self, run_id: str, kind: IdList) -> Iterator[VerdictId]:
        """The whole list, read a chunk at a time (a CSV streams it)."""
        self._store.runs.get(run_id)
        return self._store.verdict_ids.each(run_id, kind)

    def queue_positions(self) -> dict[str, int]:
        """Each queued run's place in line behind the running jobs (1: the next to start when one
        ends), in the order the watcher launches; a run that a free slot takes next has none."""
        holding, waiting = self._store.runs.line()
        return places_in_line([run.id for run in waiting], len(holding), self._launch_slots)

    def list(
        self,
        *,
        state: str | None,
        requester: str | None,
        limit: int,
        cursor: str | None,
        source: str | None = None,
    ) -> tuple[builtins.list[Run], str | None]:
        return self._store.runs.list(
            state=state, requester=requester, source=source, kinds=_LISTED_KINDS, limit=limit, cursor=cursor
        )

    def sources(self) -> builtins.list[SourceTable]:
        """Each source with the snapshot a replay planned now would pin. A table that cannot be read
        is still listed, with the reason, so one broken table does not hide the catalog."""
        listed = []
        for name in self._catalog.names():
            source = self._catalog.sources[name]
            try:
                listed.append(SourceTable(source, self._table_stats.snapshot(source.table)))
            except ReplayError as exc:
                listed.append(SourceTable(source, None, unreadable=str(exc)))
        return listed

    def counts_by_state(self) -> dict[str, int]:
        return {str(state): count for state, count in self._store.runs.count_by_state().items()}

    def totals(self) -> dict[str, int]:
        return self._store.runs.totals()

    def reconcile(self, actor: str, run_id: str) -> Run:
        """Queue a reconcile of a finished run: its window's event ids against its topic, in a Spark
        job (the same launcher); the verdict lands on the run and in its thread. Publishes nothing, so
        anyone may ask; a reconcile already under way for the run is returned instead of a second."""

        def work() -> Run:
            subject = self.get(run_id)
            if subject.kind == RunKind.RECONCILE:
                raise BadRequest(f"{run_id} is itself a reconcile; reconcile {subject.reconciles} instead")
            if subject.options.repair_of is not None:
                raise BadRequest(
                    f"{run_id} is a repair of {subject.options.repair_of}: reconcile that run instead "
                    "(its verdict counts every repair's records)"
                )
            if not RunState(subject.state).terminal:
                raise Conflict(f"run {run_id} is still {subject.state}: it is reconciled when it ends")
            if subject.state == RunState.SKIPPED:
                raise Conflict(f"run {run_id} was skipped: it selected nothing to reconcile")
            pending = self._store.runs.unfinished_reconcile(run_id)
            if pending is not None:
                return pending
            self._check_reconcile_cap(actor)
            self._check_caps(actor)
            return self._store.runs.create(
                kind=RunKind.RECONCILE,
                source=subject.source,
                topic=subject.topic,
                tps=0,
                requester=actor,
                window_start=subject.window_start,
                window_end=subject.window_end,
                window_label=subject.window_label,
                watermark_column=subject.watermark_column,
                watermark_low=subject.watermark_low,
                watermark_high=subject.watermark_high,
                # it reads the subject's window the same way, and where the subject set bad records aside
                options=RunOptions(
                    window=subject.options.window,
                    relative=subject.options.relative,
                    topic_mode=subject.options.topic_mode,
                    on_error=subject.options.on_error,
                    dlq_topic=subject.options.dlq_topic,
                    delivery=subject.options.delivery,  # a transactional run is read committed
                    cluster=subject.options.cluster,  # its topic is where the subject's went
                    snapshot=subject.options.snapshot,  # the table as the subject read it, not as now
                    table_metadata=subject.options.table_metadata,
                    files=subject.options.files,
                    where=subject.options.where,  # the ids expected are the ones its filter kept
                    keys_file=subject.options.keys_file,
                    keys_digest=subject.options.keys_digest,
                    # the erasures it honoured: the version its job reported, else the one planned
                    erasures=subject.options.erasures,
                    repairs=tuple(run.id for run in self._store.runs.repairs_of(subject)),
                    erasures_as_of=_iso(subject.erasures_as_of) or subject.options.erasures_as_of,
                ),
                reconciles=subject.id,
                offsets=subject.offsets,  # where the subject's records lie; None: the whole topic
            )

        run = self._audit.refusing(actor, "reconcile", run_id, work)
        self._audit.accepted(actor, "reconcile", run_id, reconcile_run=run.id)
        self._wake_watcher()
        return run

    def repair(
        self, actor: str, run_id: str, *, confirm_live: bool = False, slack_channel: str | None = None
    ) -> Run:
        """Queue a run that publishes only the ids ``run_id``'s reconcile found missing, from the same
        pinned selection into the same topic, then reconciles the whole selection against the topic
        (the run's records and every repair's). The requester, the source's owners or an admin; a
        live topic needs the confirmation (and the approvals) a live replay does."""

        def options(subject: Run) -> tuple[int, RunOptions]:
            missing = self._check_repairable(actor, subject)
            earlier = tuple(run.id for run in self._store.runs.repairs_of(subject))
            return missing, replace(subject.options, repair_of=subject.id, repairs=earlier)

        return self._follow_up(actor, run_id, "repair", options, confirm_live, slack_channel)

    def redrive(
        self, actor: str, run_id: str, *, confirm_live: bool = False, slack_channel: str | None = None
    ) -> Run:
        """Queue a run that sends ``run_id``'s dead letters back to the topic they were meant for,
        paced at its rate (only those no earlier redrive landed), and reconciles them; a record that
        fails again is set aside again with its new reason. Who may, and a live topic's
        confirmation, as for a repair."""

        def options(subject: Run) -> tuple[int, RunOptions]:
            letters = self._check_redrivable(actor, subject)
            earlier = tuple(run.id for run in self._store.runs.redrives_of(subject))
            # its rows are dead letters: no filter, key file, projection or timeline of the table's
            # a record refused again goes back to the dead-letter topic: no transactions (ADR 0057)
            plain = replace(subject.options, where=None, keys_file=None, keys_digest=None, fields=())
            plain = replace(plain, speed=None, shaped_s=None, delivery="idempotent")
            return letters, replace(plain, redrive_of=subject.id, redrives=earlier)

        return self._follow_up(actor, run_id, "redrive", options, confirm_live, slack_channel)

    def _follow_up(
        self,
        actor: str,
        run_id: str,
        action: str,
        options: Callable[[Run], tuple[int, RunOptions]],
        confirm_live: bool,
        slack_channel: str | None,
    ) -> Run:
        """A run that finishes what ``run_id`` started (a repair, a redrive): its topic, its rate, its
        window, and ``options(subject)``'s rows and options once they were allowed."""

        def work() -> Run:
            subject = self.get(run_id)
            rows, chosen = options(subject)
            if subject.options.topic_mode == "live":
                if not confirm_live:
                    raise Conflict(
                        f"the {action} of {run_id} publishes into the live topic '{subject.topic}': it "
                        "needs an explicit confirmation (confirm_live=true; the CLI's --confirm-live)"
                    )
                self._check_approval(actor, self._catalog.get(subject.source), None)
            self._check_caps(actor)
            follow_up = replace(
                chosen,
                planned_rows=rows,
                planned_eta_s=round(self.eta(rows, max(subject.tps, 1)).total_s, 1),
                request=f"{action} {run_id}",
                watch=(),
                auto=None,
                overrides=(),
                approved_by=None,
            )
            return self._store.runs.create(
                kind=RunKind.REPLAY,
                source=subject.source,
                topic=subject.topic,
                topic_created=False,
                tps=max(subject.tps, 1),
                requester=actor,
                window_start=subject.window_start,
                window_end=subject.window_end,
                window_label=subject.window_label,
                options=follow_up,
                slack_channel=slack_channel,
            )

        run = self._audit.refusing(actor, action, run_id, work)
        self._audit.accepted(actor, action, run_id, run=run.id, rows=run.options.planned_rows)
        self._wake_watcher()
        return run

    def _check_redrivable(self, actor: str, subject: Run) -> int:
        """How many records the subject set aside, once ``actor`` may send them back."""
        run_id = subject.id
        if subject.kind == RunKind.RECONCILE:
            raise BadRequest(f"{run_id} is a reconcile: redrive the run whose records were set aside")
        if subject.kind != RunKind.REPLAY:
            raise BadRequest(
                f"{run_id} is a pipeline's run: its dead letters are redriven by replaying its slot's "
                "rows again (a redrive takes a replay's)"
            )
        if subject.options.redrive_of is not None:
            raise BadRequest(f"{run_id} is a redrive of {subject.options.redrive_of}: redrive that run")
        if not RunState(subject.state).terminal:
            raise Conflict(f"run {run_id} is still {subject.state}: redrive its dead letters once it ended")
        source = self._catalog.get(subject.source)
        admins = self._settings.admins
        if not may_cancel_run(actor, requester=subject.requester, source_owners=source.owners, admins=admins):
            raise Forbidden("only the requester, the source's owners or an admin may redrive this run")
        if not subject.options.dlq_topic or not subject.dead_lettered:
            raise BadRequest(f"run {run_id} set no records aside: there are no dead letters to redrive")
        if source.encrypted_columns:
            raise BadRequest(
                f"the dead letters of '{source.name}' hold its values as stored, PII still encrypted: "
                f"replay the window again (keys= or where=) instead of redriving {run_id}"
            )
        erased_by = source.erasures.column if source.erasures is not None else None
        if erased_by is not None and erased_by != source.key_column:
            raise BadRequest(
                f"'{source.name}' erases by {erased_by}, which a dead letter does not carry: "
                f"replay the window again (keys= or where=) instead of redriving {run_id}"
            )
        redrives = self._store.runs.redrives_of(subject)
        pending = [run.id for run in redrives if not RunState(run.state).terminal]
        if pending:
            raise Conflict(f"{pending[0]} is already redriving {run_id}: wait for it to end")
        return int(subject.dead_lettered)

    def _check_repairable(self, actor: str, subject: Run) -> int:
        """How many ids the subject's reconcile found missing, once it may be repaired by ``actor``."""
        run_id = subject.id
        if subject.kind != RunKind.REPLAY:
            raise BadRequest(f"{run_id} is a {subject.kind} run: only a replay's missing ids are repaired")
        if subject.options.repair_of is not None:
            raise BadRequest(f"{run_id} is a repair of {subject.options.repair_of}: repair that run instead")
        if not RunState(subject.state).terminal:
            raise Conflict(
                f"run {run_id} is still {subject.state}: repair it once it ended and was reconciled"
            )
        source = self._catalog.sources.get(subject.source)
        owners = source.owners if source is not None else ()
        if not may_cancel_run(
            actor, requester=subject.requester, source_owners=owners, admins=self._settings.admins
        ):
            raise Forbidden("only the requester, the source's owners or an admin may repair this run")
        if subject.reconcile is None:
            raise BadRequest(
                f"run {run_id} has no reconcile to repair from: `/replay reconcile {run_id}` first"
            )
        missing = subject.reconcile.get("missing")
        if missing is None:
            error = subject.reconcile.get("error") or "its counts are unknown"
            raise BadRequest(
                f"the last reconcile of {run_id} could not be done ({error}): `reconcile {run_id}` again"
            )
        if int(missing) == 0:
            raise BadRequest(f"the reconcile of {run_id} found nothing missing: there is nothing to repair")
        pending = [run.id for run in self._store.runs.repairs_of(subject) if not RunState(run.state).terminal]
        if pending:
            raise Conflict(f"{pending[0]} is already repairing {run_id}: wait for its verdict")
        return int(missing)

    def cancel(self, actor: str, run_id: str) -> Run:
        def work() -> Run:
            run = self.get(run_id)
            source = self._catalog.sources.get(run.source)
            owners = source.owners if source is not None else ()
            if not may_cancel_run(
                actor, requester=run.requester, source_owners=owners, admins=self._settings.admins
            ):
                raise Forbidden("only the requester, the source's owners or an admin may cancel this run")
            if RunState(run.state).terminal:
                raise Conflict(f"run {run_id} already ended ({run.state})")
            if run.state == RunState.CANCELLING:
                return run
            return self._store.runs.transition(run_id, RunState.CANCELLING)

        run = self._audit.refusing(actor, "cancel", run_id, work)
        self._audit.accepted(actor, "cancel", run_id)
        self._wake_watcher()
        return run
