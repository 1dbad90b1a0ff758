"""Ports: what the use cases and the watcher need from the outside world, as small interfaces.

The use cases depend on these, never on `daemon.adapters`; `daemon.runtime.server` (the one place that
knows every implementation) builds the adapters and injects them.

- `Launcher`: starts, watches and stops a publisher job. Implementations are named `<Tech>Launcher`
  (`LocalSparkLauncher`, `EmrServerlessLauncher`). A handle is a plain JSON-able dict stored with the
  run, so a restarted daemon can re-attach to a job it did not start.
- `ApplicationDeleter`: frees a pipeline's own compute (an EMR Serverless application).
- `TopicAdmin`: creates, describes and deletes Kafka topics (`KafkaTopicAdmin`).
- `ConsumerGroupAdmin`: reads a group's members and offsets, moves them (`KafkaConsumerGroupAdmin`).
- `TableStats`: cheap facts about a lake table, read without a Spark job (`ParquetTableStats`).
- `ProgressSource`: a running job's confirmed count, from its progress beacons (`KafkaProgressSource`).
- `DeadLetters`: a run's dead letters, read back for its page (`KafkaDeadLetters`).
- `Notifier`: tells people what their runs and pipelines do (`SlackNotifier`, `LogNotifier`).
- `RunControlChannel`: tells running jobs of rate changes, pauses and resumes (`KafkaRunControlChannel`).

The four Kafka ports come one per named cluster (`Clusters`): a use case picks the one of the
source's cluster, or of the cluster a run or pipeline recorded.
"""

from __future__ import annotations

import enum
import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Generic, TypeVar

from daemon.contract.models import IdlePrompt, PipelineOut, RateSeriesOut, RunOut
from daemon.core.clusters import DEFAULT_CLUSTER
from daemon.core.commits import Commit
from daemon.core.errors import UnknownCluster
from daemon.core.grammar.predicates import Kind, Predicate
from daemon.core.lag import GroupState
from daemon.core.partitions import PartitionProgress
from daemon.core.run_control import RateChange
from daemon.core.watermarks import Value
from daemon.usecases.catalog import ErasureList, TableRef

Handle = dict[str, Any]
T = TypeVar("T")


class Clusters(Generic[T]):
    """One adapter per named Kafka cluster, made when the cluster is first used (the topic TTL's
    sweep uses every one). A name the daemon has no settings for is `UnknownCluster`, naming the
    ones it has."""

    def __init__(self, make: Callable[[str], T], names: Iterable[str] = (DEFAULT_CLUSTER,)) -> None:
        self._make = make
        self._names = tuple(names)
        self._made: dict[str, T] = {}
        self._lock = threading.Lock()

    @classmethod
    def one(cls, adapter: T) -> Clusters[T]:
        """A daemon with only the default cluster, reached through `adapter`."""
        return cls(lambda _name: adapter)

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def __getitem__(self, name: str) -> T:
        if name not in self._names:
            raise UnknownCluster(name, self._names)
        with self._lock:
            if name not in self._made:
                self._made[name] = self._make(name)
            return self._made[name]

    def made(self) -> list[T]:
        """The adapters made so far (to close them)."""
        with self._lock:
            return list(self._made.values())


RESULT_PREFIX = "REPLAY_RESULT "
FAILED_PREFIX = "REPLAY_FAILED "


class JobState(enum.Enum):
    PENDING = "pending"  # accepted by the launcher, not running yet
    RUNNING = "running"
    EXITED = "exited"  # the job's process ended; its result line says how
    LOST = "lost"  # the job disappeared without a trace


@dataclass(frozen=True)
class JobOutcome:
    """What the job said about itself in its final line (`REPLAY_RESULT` or `REPLAY_FAILED`)."""

    succeeded: bool
    payload: dict[str, Any]

    @property
    def reason(self) -> str:
        return str(self.payload.get("reason", "")) if not self.succeeded else ""


def parse_outcome(lines: Iterable[str]) -> JobOutcome | None:
    """The last result line among `lines`, if any; other output is ignored."""
    outcome: JobOutcome | None = None
    for line in lines:
        text = line.strip()
        for prefix, ok in ((RESULT_PREFIX, True), (FAILED_PREFIX, False)):
            if text.startswith(prefix):
                try:
                    payload = json.loads(text[len(prefix) :])
                except json.JSONDecodeError:
                    continue
                if isinstance(payload, dict):
                    outcome = JobOutcome(succeeded=ok, payload=payload)
    return outcome


class Launcher(ABC):
    """Submit, poll, read output, cancel. Every method is safe to call again after a daemon restart.

    `max_concurrent_runs` is how many jobs it runs at once (None: no limit); the watcher keeps the
    rest queued, first come first launched.
    """

    kind: str
    max_concurrent_runs: int | None = None

    def notify_on_change(self, wake: Callable[[], None]) -> None:
        """Call `wake` when a job may have ended (e.g. its process exited), so the watcher looks now
        rather than at its next poll; a launcher that cannot tell is polled."""
        del wake  # this launcher cannot tell: the watcher's poll finds its jobs' ends

    def warm(self, workers: int) -> bool | None:
        """Whether a run of `workers` slots asked for now would start warm (a standby driver, a started
        application); None when this launcher cannot tell."""
        del workers  # this launcher keeps nothing warm it knows of
        return None

    def keep_warm(self, busy: Callable[[], bool]) -> None:
        """The daemon's background work has started: keep whatever makes the next launch faster, never
        taking cores while ``busy()`` (every launcher slot held, counted across daemons)."""
        del busy  # this launcher has nothing to keep warm

    def close(self) -> None:  # noqa: B027 - optional: a launcher holding nothing does nothing
        """The daemon is stopping: release what the launcher holds beside its jobs (jobs go on)."""

    @abstractmethod
    def submit(
        self, run_id: str, spec_json: str, *, workers: int, application_id: str | None = None
    ) -> Handle:
        """Start the job (on `application_id`, from `pipeline_application`, when given); calling it
        twice for one run id must not start two jobs."""

    def pipeline_application(self, pipeline_id: str, workers: int) -> str | None:
        """The pipeline's own compute, found or created and sized for `workers`: all its runs share
        it and only de-provisioning deletes it (`ApplicationDeleter`). None: this launcher has none
        (each local job is its own process)."""
        del pipeline_id, workers
        return None

    @abstractmethod
    def state(self, handle: Handle) -> JobState: ...

    @abstractmethod
    def outcome(self, handle: Handle) -> JobOutcome | None:
        """The job's final result line, once it has printed one."""

    @abstractmethod
    def log_tail(self, handle: Handle, lines: int = 20) -> list[str]:
        """The last lines of the job's output, to explain a failure with no result line."""

    @abstractmethod
    def cancel(self, handle: Handle) -> None:
        """Stop the job; a job already gone is not an error."""

    def release(self, handle: Handle) -> bool:
        """Free what the finished job held (its spec, its own EMR application); True once nothing is left."""
        return True


class ApplicationDeleter(ABC):
    """Frees a pipeline's long-lived compute when the janitor de-provisions it."""

    @abstractmethod
    def delete_application(self, app_id: str, *, timeout_s: float = 0.0) -> bool:
        """True once the application is gone; an application already gone is not an error."""


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int
    config: dict[str, str]


class TopicAdmin(ABC):
    """Kafka topics; failures are domain errors (`Unavailable`, `BadRequest`), never client errors."""

    @abstractmethod
    def describe(self, topic: str) -> TopicInfo | None:
        """The topic's partition count and config, or None when it does not exist."""

    @abstractmethod
    def create(self, topic: str, *, partitions: int, config: Mapping[str, str]) -> TopicInfo:
        """Create a topic; an existing topic of that name is an error, never silently reused."""

    @abstractmethod
    def delete(self, topic: str) -> bool:
        """Delete a topic; False if it was already gone (so de-provisioning can be repeated)."""

    @abstractmethod
    def names(self, prefix: str) -> list[str]:
        """The names of the cluster's topics that start with ``prefix``, sorted."""


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[tuple[str, int], ...]  # (topic, partition) pairs


@dataclass(frozen=True)
class GroupDescription:
    group: str
    state: GroupState
    members: tuple[GroupMember, ...]


class ConsumerGroupAdmin(ABC):
    """Consumer groups' members and offsets; failures are domain errors (`Unavailable`, `NotFound`,
    `GroupHasMembers`, `BadRequest`), never client errors. Offsets are keyed by partition."""

    @abstractmethod
    def describe_group(self, group: str) -> GroupDescription:
        """State and members; a group Kafka does not know comes back `dead` with no members."""

    @abstractmethod
    def committed(self, group: str, topic: str | None = None) -> dict[tuple[str, int], int | None]:
        """(topic, partition) -> committed offset (None: never committed); every topic when None."""

    @abstractmethod
    def partitions(self, topic: str) -> list[int]:
        """The topic's partitions; `NotFound` when there is no such topic."""

    @abstractmethod
    def end_offsets(self, topic: str) -> dict[int, int]: ...

    @abstractmethod
    def earliest_offsets(self, topic: str) -> dict[int, int]: ...

    @abstractmethod
    def offsets_for_time(self, topic: str, at: datetime) -> dict[int, int | None]:
        """The first offset whose record is at or after `at`; None where there is none."""

    @abstractmethod
    def earliest_timestamps(self, topic: str) -> dict[int, datetime | None]:
        """Each partition's oldest retained record's timestamp; None for an empty partition."""

    @abstractmethod
    def alter_offsets(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Commit these offsets for the group; `GroupHasMembers` when Kafka refuses for that reason."""


@dataclass(frozen=True)
class WindowRows:
    """The rows of a window as a plan counts them: whole partition days, optionally narrowed to
    `start <= time_column < end`, and to the rows `filter` keeps (``where=``, checked against the
    table's `column_kinds` first)."""

    partition_column: str
    days: Sequence[date]
    time_column: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    filter: Predicate | None = None
    # A Parquet table: the window's data files the plan listed (relative to the table's root), which
    # every count and read of the run sees; None: list the day directories now.
    files: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ErasureVersion:
    """An erasure list as a plan read it."""

    keys: int  # distinct erased keys up to ``as_of``
    as_of: datetime | None  # the newest erasure: the list's version; None: the list is empty


@dataclass(frozen=True)
class KeyList:
    """A key file (``keys=@<file>``) as a plan read it."""

    keys: tuple[str, ...]  # distinct, sorted
    digest: str  # pins them: the job refuses a file that changed since


class TableStats(ABC):
    """Answers within Slack's time budget: metadata and pruned reads, never a scan of the table.

    A table is the catalog's `TableRef` (a path or a name in a lake catalog, and its format);
    `snapshot` pins a count to one version of an Iceberg or Delta table (None: the current one; plain
    Parquet has none)."""

    @abstractmethod
    def snapshot(self, table: TableRef) -> str | None:
        """The table's current snapshot (Iceberg snapshot id, Delta version); None for Parquet."""

    @abstractmethod
    def metadata_file(self, table: TableRef) -> str | None:
        """For a table named in a catalog, what the job reads instead of asking the catalog: an
        Iceberg table's current metadata file, a Delta or Parquet table's location; None for a table
        at a path. A plan asks it first, once, and reads the table there (`TableRef.read_at`), so its
        snapshot, its counts and its run all come from one answer of the catalog."""

    @abstractmethod
    def column_names(self, table: TableRef) -> list[str]:
        """The table's columns, partition columns included."""

    @abstractmethod
    def erasure_version(self, erasures: ErasureList) -> ErasureVersion:
        """How many keys a source's erasure list holds and its newest erasure; DependencyDown when it
        cannot be read (a run must not go without it)."""

    @abstractmethod
    def key_list(self, path: str) -> KeyList:
        """A key file's distinct keys and digest; DependencyDown when it cannot be read, BadRequest
        when it holds none or more than a key file may."""

    @abstractmethod
    def column_kinds(self, table: TableRef) -> dict[str, Kind]:
        """The columns a filter can test, by kind (what ``where=`` is checked against)."""

    @abstractmethod
    def count_window_rows(self, table: TableRef, rows: WindowRows, *, snapshot: str | None = None) -> int:
        """The table's rows ``rows`` selects, as of ``snapshot``. With a filter it reads the columns
        the filter tests (from the window's files only, skipping what their statistics rule out)."""

    @abstractmethod
    def window_files(
        self, table: TableRef, partition_column: str, days: Sequence[date]
    ) -> tuple[str, ...] | None:
        """A Parquet table's data files in the window's day directories, relative to its root, in name
        order: what a run pins instead of a snapshot. None for a table with snapshots."""

    @abstractmethod
    def time_histogram(
        self,
        table: TableRef,
        rows: WindowRows,
        *,
        snapshot: str | None,
        origin: datetime,
        speed: float,
        width: float,
    ) -> list[int]:
        """The window's events per ``width`` seconds of ``(event time - origin) / speed`` (``rows``
        names the event time column), as of ``snapshot``: a shaped replay's histogram. It reads one
        column of the window, not only metadata: a plan of ``tps=original`` costs that read."""

    @abstractmethod
    def max_value(self, table: TableRef, column: str, *, snapshot: str | None = None) -> Value | None:
        """The watermark column's maximum as of ``snapshot`` (a pipeline run's high mark); None for
        no rows."""

    @abstractmethod
    def commits(self, table: TableRef, *, after: str, upto: str) -> list[Commit]:
        """The table's commits after snapshot ``after`` up to ``upto``, oldest first; BadRequest
        when ``after`` is no longer in ``upto``'s history (expired, rolled back, its log dropped)."""

    @abstractmethod
    def follow_refusal(self, table: TableRef) -> str | None:
        """Why a pipeline cannot follow the table's commits (Parquet has none; a Delta table without
        its change data feed); None when it can."""


@dataclass(frozen=True)
class DeadLetter:
    """One record a run set aside: its event id, why (the broker's or the encoder's words), when."""

    event_id: str
    reason: str
    at: datetime | None
    partition: int
    offset: int


class DeadLetters(ABC):
    """A run's dead letters, read back from its source's dead-letter topic (`KafkaDeadLetters`)."""

    @abstractmethod
    def of_run(self, topic: str, run_id: str, *, limit: int) -> list[DeadLetter]:
        """The first `limit` letters of `run_id` on `topic`; none when the topic does not exist."""


@dataclass(frozen=True)
class ProgressSample:
    """A running job's confirmed count, and when its newest beacon was sent (the job's own clock)."""

    confirmed: int
    at: float | None = None  # epoch seconds of the newest beacon; None for beacons without a time
    partitions: tuple[PartitionProgress, ...] = ()  # each partition's line, as its beacons say


class ProgressSource(ABC):
    """A running job's confirmed count; one reader per followed run, kept between watcher ticks."""

    @abstractmethod
    def sample(self, run_id: str, since: float | None = None) -> ProgressSample | None:
        """The latest count, or None when no sample could be read this time. ``since``: when the run
        was submitted (epoch seconds), so its beacons are looked for from there, not from the start."""

    def confirmed(self, run_id: str, since: float | None = None) -> int | None:
        sample = self.sample(run_id, since)
        return None if sample is None else sample.confirmed

    @abstractmethod
    def forget(self, run_id: str) -> None:
        """The run ended: drop what was kept to follow it."""

    @abstractmethod
    def forget_all_but(self, run_ids: Collection[str]) -> None:
        """Drop what was kept for any run but ``run_ids`` (those still followed): a run concluded
        elsewhere (cancelled while queued, ended by another daemon) is never ``forget``-ed here."""

    @abstractmethod
    def close(self) -> None:
        """Release every reader (the daemon is stopping)."""


class RunControlChannel(ABC):
    """The channel running jobs read their rate changes from; failures are ``Unavailable``.

    A job's spec carries ``end_offset()`` taken *before* the run's changes were read from the store, so
    every change is either in the spec or published at or after that offset.
    """

    topic: str

    @abstractmethod
    def ensure_topic(self) -> None:
        """Create the channel's topic when it is missing (at start-up); an existing one is kept."""

    @abstractmethod
    def end_offset(self) -> int:
        """Where the next message will land: a job reads from here on."""

    @abstractmethod
    def publish(self, run_id: str, changes: Sequence[RateChange], *, key: str) -> None:
        """Send every change of the run so far (version ``len(changes)``), signed with the run's
        control ``key``, durably, or raise."""

    def close(self) -> None:  # noqa: B027 - optional: a channel holding no client does nothing
        """The daemon is stopping: flush and close its clients."""


@dataclass(frozen=True)
class RunThread:
    """Where a run's story is told: the parent card and its one progress message, in `channel`
    (the requester's DM when the run's channel cannot be posted to)."""

    channel: str
    ts: str
    progress_ts: str | None = None


class Notifier(ABC):
    """How the watcher, the pipelines and the janitor tell people what happens, in wire models.

    The caller decides *whether* to notify (dedup keys in the store make every message at-most-once,
    across restarts); a notifier only renders and delivers.
    """

    @abstractmethod
    def run_started(self, run: RunOut) -> RunThread | None:
        """Announce the run (parent card + its one progress message); None when there is no channel."""

    @abstractmethod
    def run_state_changed(self, run: RunOut) -> None:
        """Edit the parent card to show the run's new state (submitted -> running ...)."""

    @abstractmethod
    def run_progress(self, run: RunOut, *, rate: float | None) -> None:
        """Edit the progress message in place; `rate` is the current rate (events per second) when known."""

    @abstractmethod
    def run_finished(
        self, run: RunOut, series: RateSeriesOut | None = None, delivered: Callable[[], None] | None = None
    ) -> None:
        """The final word (the honest report, mentioning the requester) and, given a series, its chart.
        Raises a `ReplayError` only when the final word itself was not delivered: it is sent again.
        Calls `delivered` as soon as the final word is out (before the chart), so the caller records
        it with the least time in which a crash could make it send the word twice."""

    @abstractmethod
    def run_reconciled(self, run: RunOut) -> None:
        """An on-demand reconcile's verdict, as a reply in the run's thread."""

    @abstractmethod
    def run_rate_changed(self, run: RunOut, *, actor: str, reason: str | None = None) -> None:
        """A rate change, pause or resume (the newest of ``run.rate_changes``), as a reply in the run's
        thread (``reason``: why ``tps=auto`` decided it); the live progress message shows the new rate at
        its next edit."""

    @abstractmethod
    def watch_started(self, run: RunOut) -> str | None:
        """Post the run's consumer-group watch message (`run.watch`) in its thread; returns its ts."""

    @abstractmethod
    def watch_progress(self, run: RunOut, *, message_ts: str) -> None:
        """Edit the watch message in place: each group's lag, drain and time back to its baseline."""

    @abstractmethod
    def watch_concluded(self, run: RunOut, group: str) -> None:
        """One line in the run's thread: `group` caught up (when, how long after the last event), or its
        watch timed out with the lag left."""

    @abstractmethod
    def topic_expiry(self, run: RunOut, *, deletes_at: datetime | None) -> str:
        """Tell the run's requester, in its thread (its channel without one, else their DM), that its
        one-off topic is deleted at `deletes_at`, or (None) was just deleted; returns where it went."""

    @abstractmethod
    def pipeline_scheduled(self, pipeline: PipelineOut) -> str | None:
        """Announce a new pipeline; returns the thread its runs will reply in, if any."""

    @abstractmethod
    def idle_prompt(self, prompt: IdlePrompt, owner: str) -> str:
        """Ask one owner about an idle pipeline (Keep / Delete now); returns where it was delivered."""

    @abstractmethod
    def pipeline_removed(self, pipeline: PipelineOut, owner: str, removed: list[str], reason: str) -> str:
        """Tell one owner what de-provisioning removed; returns where it was delivered."""
