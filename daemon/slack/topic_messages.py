"""Block Kit for a one-off replay topic's end of life: the notice before its TTL deletes it, and the
line once it is gone. Both mention the requester: the topic holds their replayed (decrypted) events."""

from __future__ import annotations

from datetime import datetime

from daemon.contract.models import RunOut
from daemon.slack.blocks import (
    Message,
    escape,
    is_user_id,
    mention,
    message,
    sections,
    when,
)


def _who(run: RunOut) -> str:
    return mention(run.requester) if is_user_id(run.requester) else escape(run.requester)


def topic_expiring(run: RunOut, deletes_at: datetime) -> Message:
    """Said once, ahead of the deletion: what goes, when, and what to do to keep the events."""
    text = (
        f":wastebasket: {_who(run)}, the topic `{escape(run.topic)}` of run `{escape(run.id)}` will be "
        f"deleted at {when(deletes_at)} (the platform keeps one-off replay topics for a limited time). "
        "Consume or copy what you still need before then; to have the events again later, replay the window."
    )
    return message(text, *sections(text))


def topic_deleted(run: RunOut) -> Message:
    """Said once the topic is gone."""
    text = (
        f":put_litter_in_its_place: {_who(run)}, the topic `{escape(run.topic)}` of run `{escape(run.id)}` "
        "was deleted: its time to live ran out. Replay the window again if you need the events."
    )
    return message(text, *sections(text))
