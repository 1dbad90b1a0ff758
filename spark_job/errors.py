"""The job's own errors: each one's message is the single human-readable reason a run reports.

Its root is `JobError`, not the daemon's `ReplayError`: the job runs on executors and imports nothing
of the daemon, and the two trees never meet (the daemon reads a job's failure as its reason text).

::

    JobError                    any failure the job reports as ``REPLAY_FAILED``
    ├── SpecError (ValueError)  the job spec is invalid; the message names the field
    ├── SourceError             the source cannot give the rows: unknown column, empty window
    ├── SlotsError              the cluster shape defeats the throttle (dynamic allocation)
    ├── TopicError              the target topic is missing, or the progress topic cannot be made
    └── PublishError            the broker refused records (its error text), or a task gave up

Third-party errors (Spark's, confluent-kafka's) are translated into these in one place each:
``reason_of`` in ``spark_job.result`` for what escapes Spark, ``DeliveryCounter`` for the broker.
"""

from __future__ import annotations


class JobError(Exception):
    """A failure with a one-line reason meant for the person who asked for the replay."""


class SpecError(JobError, ValueError):
    """The job spec is invalid."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"invalid spec field '{field}': {problem}")
        self.field = field


class SourceError(JobError):
    """The source table cannot provide what the spec asks for."""


class SlotsError(JobError):
    """The number of task slots cannot be known, so no rate can be divided among them."""


class TopicError(JobError):
    """A topic the job needs is missing or cannot be created."""


class PublishError(JobError):
    """Records were not confirmed by the broker; the message carries the broker's error text."""
