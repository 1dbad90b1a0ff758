"""The job store: schema, migrations and repositories (SQLite or PostgreSQL).

Its vocabulary (states, ids) and its errors belong to the pure core, ``daemon.core``; the store imports
them and nothing else of the project.
"""

from store.audit_log import AuditLog
from store.db import Store, create_store_engine
from store.migrate import downgrade, upgrade
from store.models import AuditEntry, Notification, Pipeline, Run, RunProgress
from store.notification_repository import NotificationRepository
from store.pipeline_repository import PipelineRepository
from store.run_repository import RunRepository

__all__ = [
    "AuditEntry",
    "AuditLog",
    "Notification",
    "NotificationRepository",
    "Pipeline",
    "PipelineRepository",
    "Run",
    "RunProgress",
    "RunRepository",
    "Store",
    "create_store_engine",
    "downgrade",
    "upgrade",
]
