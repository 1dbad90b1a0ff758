"""The job store: schema, migrations and repositories (SQLite or PostgreSQL)."""

from store.audit import AuditLog
from store.db import Store, create_store_engine
from store.errors import (
    InvalidTransition,
    NotificationNotFound,
    PipelineNotFound,
    RunNotFound,
    StaleUpdate,
    StoreError,
)
from store.migrate import downgrade, upgrade
from store.models import AuditEntry, Notification, Pipeline, Run, RunProgress
from store.notifications import NotificationRepository
from store.pipelines import PipelineRepository
from store.runs import RunRepository
from store.states import TERMINAL_RUN_STATES, Outcome, PipelineState, RunKind, RunState

__all__ = [
    "TERMINAL_RUN_STATES",
    "AuditEntry",
    "AuditLog",
    "InvalidTransition",
    "Notification",
    "NotificationNotFound",
    "NotificationRepository",
    "Outcome",
    "Pipeline",
    "PipelineNotFound",
    "PipelineRepository",
    "PipelineState",
    "Run",
    "RunKind",
    "RunNotFound",
    "RunProgress",
    "RunRepository",
    "RunState",
    "StaleUpdate",
    "Store",
    "StoreError",
    "create_store_engine",
    "downgrade",
    "upgrade",
]
