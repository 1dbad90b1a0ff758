"""Domain errors raised by the job store.

Each error carries the id it is about, so callers can answer Slack precisely, and also
subclasses the builtin a generic caller would expect::

    Exception
    └── StoreError
        ├── RunNotFound(StoreError, LookupError)
        ├── PipelineNotFound(StoreError, LookupError)
        ├── NotificationNotFound(StoreError, LookupError)
        ├── StaleUpdate(StoreError, RuntimeError)       optimistic-concurrency conflict
        └── InvalidTransition(StoreError, ValueError)   state machine refused the change
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class for every error the store raises on purpose."""


class RunNotFound(StoreError, LookupError):
    """No run has this id."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r}")
        self.run_id = run_id


class PipelineNotFound(StoreError, LookupError):
    """No pipeline has this id."""

    def __init__(self, pipeline_id: str) -> None:
        super().__init__(f"no pipeline with id {pipeline_id!r}")
        self.pipeline_id = pipeline_id


class StaleUpdate(StoreError, RuntimeError):
    """The row changed since the caller read it (its version moved on)."""

    def __init__(self, entity_id: str, expected_version: int, actual_version: int) -> None:
        super().__init__(
            f"{entity_id!r} changed since it was read: version {actual_version}, expected {expected_version}"
        )
        self.entity_id = entity_id
        self.expected_version = expected_version
        self.actual_version = actual_version


class InvalidTransition(StoreError, ValueError):
    """The state machine does not allow this change (e.g. anything after a terminal state)."""

    def __init__(self, entity_id: str, from_state: str, to_state: str, reason: str = "") -> None:
        from_state, to_state = str(from_state), str(to_state)  # plain values, not enum reprs
        message = f"{entity_id!r} cannot go from {from_state!r} to {to_state!r}"
        super().__init__(f"{message}: {reason}" if reason else message)
        self.entity_id = entity_id
        self.from_state = from_state
        self.to_state = to_state


class NotificationNotFound(StoreError, LookupError):
    """No notification was recorded under this dedup key."""

    def __init__(self, dedup_key: str) -> None:
        super().__init__(f"no notification with dedup key {dedup_key!r}")
        self.dedup_key = dedup_key
