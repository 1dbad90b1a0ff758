"""Who may act on what: the one owner-or-admin rule, written once.

A thing's owners and the platform admins may act on it; nobody else may. The use cases ask these
functions and phrase their own refusal (``Forbidden``), so the rule cannot drift between them:

- a source may be replayed or scheduled by its owners or an admin (``may_use_source``);
- a run may be cancelled by whoever requested it, its source's owners or an admin (``may_cancel_run``),
  and so may its rate be changed, paused or resumed (``may_control_run``, the same rule);
- a pipeline may be paused, resumed, run now, kept or unscheduled by its owners or an admin
  (``may_manage_pipeline``);
- a consumer group may be rewound on a live topic by the owners of the source(s) whose live topic it
  is, or an admin (``may_rewind_group``).

What a request may say about other people depends on its credential, not on its body: only the
service credential (the bot, which verified the Slack request) may name the owner who approved a
live replay (the Slack click) or choose the channel a run's card goes to (``vouched_fields_refused``).
A personal token acts for its owner alone.
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


def may_control_run(
    actor: str, *, requester: str, source_owners: Collection[str], admins: Collection[str]
) -> bool:
    """Change a running run's rate, pause or resume it: whoever may cancel it (stopping is the extreme)."""
    return may_cancel_run(actor, requester=requester, source_owners=source_owners, admins=admins)


def may_manage_pipeline(actor: str, *, owners: Collection[str], admins: Collection[str]) -> bool:
    """Pause, resume, run now, keep or unschedule a pipeline: `owners` are its source's current owners."""
    return is_owner_or_admin(actor, owners=owners, admins=admins)


def may_rewind_group(actor: str, *, topic_owners: Collection[str], admins: Collection[str]) -> bool:
    """Move a consumer group's offsets on a live topic: the owners of the catalog source(s) whose live
    topic it is, or an admin (a topic no source claims is for admins only)."""
    return is_owner_or_admin(actor, owners=topic_owners, admins=admins)


def vouched_fields_refused(
    *, vouched: bool, approved_by: str | None = None, slack_channel: str | None = None
) -> str | None:
    """Why a request that names an approver or a channel is refused, or None when it may."""
    if vouched:
        return None
    if approved_by is not None:
        return (
            "a personal token cannot name who approved: a second owner approves with their own click "
            "on the approval prompt in Slack"
        )
    if slack_channel is not None:
        return "a personal token cannot choose the Slack channel: runs from the CLI or API post to none"
    return None
