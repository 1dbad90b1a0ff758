"""Who may act on what: the one owner-or-admin rule, written once.

A thing's owners and the platform admins may act on it; nobody else may. The use cases ask these
functions and phrase their own refusal (``Forbidden``), so the rule cannot drift between them:

- a source may be replayed or scheduled by its owners or an admin (``may_use_source``);
- a run may be cancelled by whoever requested it, its source's owners or an admin (``may_cancel_run``);
- a pipeline may be paused, resumed, run now, kept or unscheduled by its owners or an admin
  (``may_manage_pipeline``).
"""

from __future__ import annotations

from collections.abc import Collection


def is_owner_or_admin(actor: str, *, owners: Collection[str], admins: Collection[str]) -> bool:
    """The rule itself: the actor owns the thing or is a platform admin."""
    return actor in owners or actor in admins


def may_use_source(actor: str, *, source_owners: Collection[str], admins: Collection[str]) -> bool:
    """Replay or schedule a catalog source."""
    return is_owner_or_admin(actor, owners=source_owners, admins=admins)


def may_cancel_run(
    actor: str, *, requester: str, source_owners: Collection[str], admins: Collection[str]
) -> bool:
    """Cancel a run: its requester too, besides the owners of the source it reads and the admins."""
    return actor == requester or is_owner_or_admin(actor, owners=source_owners, admins=admins)


def may_manage_pipeline(actor: str, *, owners: Collection[str], admins: Collection[str]) -> bool:
    """Pause, resume, run now, keep or unschedule a pipeline (its owners include its creator)."""
    return is_owner_or_admin(actor, owners=owners, admins=admins)
