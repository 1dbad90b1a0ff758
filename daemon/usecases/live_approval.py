"""The two-owner rule for the live topic, written once for replays and pipelines.

A source with ``live_approvals: 2`` publishes into its live topic only with the approval of a second
owner: a live replay when it is created, a live pipeline when it is created and each time it is
resumed (every increment it sends after that is covered by the approval). ``approved_by`` is only
ever the owner whose own click the bot verified (see ``daemon.core.authz.vouched_fields_refused``).
"""

from __future__ import annotations

from daemon.core.errors import Conflict, Forbidden
from daemon.usecases.catalog import Source


def check_live_approval(actor: str, source: Source, approved_by: str | None, *, what: str) -> None:
    """Refuse ``what`` ("live replay", "live pipeline") unless the source's rule is met."""
    if approved_by is None:
        if source.live_approvals > 1:
            owners = ", ".join(f"<@{owner}>" for owner in source.owners if owner != actor)
            raise Conflict(
                f"a {what} of '{source.name}' into its live topic needs the approval of a second owner "
                f"({owners}); in Slack, confirm it and one of them approves in the channel"
            )
        return
    if approved_by == actor:
        raise Forbidden(f"the requester cannot approve their own {what}; another owner must")
    if approved_by not in source.owners:
        owners = ", ".join(f"<@{owner}>" for owner in source.owners if owner != actor)
        raise Forbidden(f"only another owner of '{source.name}' ({owners}) may approve this {what}")
