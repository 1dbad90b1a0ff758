"""The one error tree of the platform: messages a person can act on, each mapped to an HTTP status.

Every layer raises these (the store included), so no call site translates one error into another;
third-party errors are translated once, in the adapter that talks to that library.

ReplayError                        user-facing message in ``str(exc)``
├── ConfigError                    bad/missing settings or catalog: exit at start-up
│   └── CatalogError               names the file, the source and the field
├── BadRequest (ValueError)        bad input: Slack ephemeral reply, HTTP 400/422, CLI exit 2
│   ├── UnknownSource (LookupError)
│   ├── UnknownCluster (LookupError) a Kafka cluster name the daemon has no settings for
│   ├── EmptyWindow
│   └── RunTooLong                 the plan's ETA exceeds the launcher's execution timeout: HTTP 422
├── Forbidden (PermissionError)    not an owner/admin: HTTP 403
├── NotFound (LookupError)         HTTP 404
│   ├── RunNotFound                carries ``run_id``
│   ├── PipelineNotFound           carries ``pipeline_id``
│   ├── NotificationNotFound       carries ``dedup_key``
│   └── GroupNotFound              no such consumer group on the cluster: carries ``group``
├── Conflict                       HTTP 409 (e.g. cancelling a finished run)
│   ├── StaleUpdate (RuntimeError) optimistic-concurrency conflict: the row's version moved on
│   ├── InvalidTransition (ValueError) the run/pipeline state machine refused the change
│   ├── OverlappingReplay          a live replay would repeat a running or recent one: carries it
│   └── GroupHasMembers            a consumer group's offsets cannot move while it has members
├── TooManyRuns                    a cap on unfinished runs is reached: HTTP 429, names the setting
└── Unavailable                    a dependency (broker, daemon, Spark) is down: HTTP 503
    └── DependencyDown             the daemon is up, one of its dependencies is not: carries
                                   ``dependency`` (kafka, table_storage, kms, emr, database) and ``where``
"""

from __future__ import annotations

from collections.abc import Collection

from daemon.core.clusters import unknown_cluster


class ReplayError(Exception):
    """Base of every error whose message is safe and useful to show to a user."""

    http_status = 500


class ConfigError(ReplayError):
    """Settings or catalog are unusable; the process should not start."""


class CatalogError(ConfigError):
    def __init__(self, path: str, source: str | None, field: str | None, problem: str) -> None:
        where = path
        if source:
            where += f": source '{source}'"
        if field:
            where += f": field '{field}'"
        super().__init__(f"{where}: {problem}")
        self.path, self.source, self.field, self.problem = path, source, field, problem


class BadRequest(ReplayError, ValueError):
    http_status = 400


class UnknownSource(BadRequest, LookupError):
    def __init__(self, name: str, known: list[str]) -> None:
        listing = ", ".join(sorted(known)) or "none"
        super().__init__(f"unknown source '{name}' (known sources: {listing})")
        self.name = name


class UnknownCluster(BadRequest, LookupError):
    def __init__(self, name: str, known: Collection[str]) -> None:
        super().__init__(unknown_cluster(name, known))
        self.name = name


class EmptyWindow(BadRequest):
    http_status = 422


class ReusedIdempotencyKey(BadRequest):
    """An Idempotency-Key sent again with a different request: answering with the first run would
    silently ignore what was asked this time."""

    http_status = 422


class RunTooLong(BadRequest):
    """The job would be killed part-way by the launcher's execution timeout: refused before it starts."""

    http_status = 422


class CapReached(ReplayError):
    """A cap is reached: unfinished (queued or going) runs, or scheduled pipelines, per person, per source
    or in all; the message names the cap and its setting."""

    http_status = 429


class Forbidden(ReplayError, PermissionError):
    http_status = 403


class NotFound(ReplayError, LookupError):
    http_status = 404


class Conflict(ReplayError):
    http_status = 409


class Unavailable(ReplayError):
    http_status = 503


class DependencyDown(Unavailable):
    """The daemon answered, a dependency did not: the message names which one and where it looked, so
    nobody goes looking at the Replay Service (or the network to it) for a broker that is down."""

    def __init__(self, dependency: str, where: str, message: str) -> None:
        super().__init__(message)
        self.dependency = dependency
        self.where = where


class RunNotFound(NotFound):
    """No run has this id."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r}")
        self.run_id = run_id


class PipelineNotFound(NotFound):
    """No pipeline has this id."""

    def __init__(self, pipeline_id: str) -> None:
        super().__init__(f"no pipeline with id {pipeline_id!r}")
        self.pipeline_id = pipeline_id


class NotificationNotFound(NotFound):
    """No notification was recorded under this dedup key."""

    def __init__(self, dedup_key: str) -> None:
        super().__init__(f"no notification with dedup key {dedup_key!r}")
        self.dedup_key = dedup_key


class StaleUpdate(Conflict, RuntimeError):
    """The row changed since the caller read it (its version moved on)."""

    def __init__(self, entity_id: str, expected_version: int, actual_version: int) -> None:
        super().__init__(
            f"{entity_id!r} changed since it was read: version {actual_version}, expected {expected_version}"
        )
        self.entity_id = entity_id
        self.expected_version = expected_version
        self.actual_version = actual_version


class InvalidTransition(Conflict, ValueError):
    """The state machine does not allow this change (e.g. anything after a terminal state)."""

    def __init__(self, entity_id: str, from_state: str, to_state: str, reason: str = "") -> None:
        from_state, to_state = str(from_state), str(to_state)  # plain values, not enum reprs
        message = f"{entity_id!r} cannot go from {from_state!r} to {to_state!r}"
        super().__init__(f"{message}: {reason}" if reason else message)
        self.entity_id = entity_id
        self.from_state = from_state
        self.to_state = to_state


class OverlappingReplay(Conflict):
    """A replay into a live topic overlaps a running or recently succeeded one of the same source."""

    def __init__(self, *, run_id: str, requester: str, state: str, window: str, topic: str) -> None:
        state = str(state)
        super().__init__(
            f"the window overlaps run {run_id} ({window}, requested by {requester}, {state}) into the live "
            f"topic '{topic}'; add force=yes to replay it anyway"
        )
        self.run_id, self.requester, self.state = run_id, requester, state
        self.window, self.topic = window, topic


class LivePipelineExists(Conflict):
    """A source already has a pipeline (active or paused) publishing into this live topic."""

    def __init__(self, pipeline_id: str, created_by: str, state: str, topic: str) -> None:
        super().__init__(
            f"pipeline {pipeline_id} (created by <@{created_by}>, {state}) already publishes this source "
            f"into the live topic '{topic}'; a second one would send every increment twice: unschedule "
            "it first"
        )
        self.pipeline_id, self.created_by, self.state, self.topic = pipeline_id, created_by, state, topic


class GroupNotFound(NotFound):
    """Kafka knows no consumer group of this name (no members, no committed offsets)."""

    def __init__(self, group: str) -> None:
        super().__init__(f"no consumer group {group!r} on the cluster (no members, no committed offsets)")
        self.group = group


class GroupHasMembers(Conflict):
    """Offsets of a group with active members cannot be moved (Kafka refuses them too)."""

    def __init__(self, group: str, message: str) -> None:
        super().__init__(message)
        self.group = group
