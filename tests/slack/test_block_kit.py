"""Every message Slack is sent is one Slack accepts, and a long one loses nothing.

Worst cases come from hypothesis: reasons and names full of the characters escaping multiplies
(`&`, `<`, `>`), backticks, mentions and newlines, ids as long as the job allows. Each block is checked
with slack_sdk's own Block Kit models and against Slack's documented limits; the final reply of a failed
run with a long error still carries its reconcile samples at the end.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk.models.blocks import Block

from daemon.contract.models import ReconcileOut, RunOut
from daemon.slack import blocks as kit
from daemon.slack import drain_messages, pipeline_messages, run_messages, topic_messages
from daemon.slack.blocks import Message
from daemon.slack.views import PipelineView
from tests.fixtures.slack import changed, wire_pipeline, wire_run

MAX_BLOCKS, MAX_SECTION, MAX_FIELD, MAX_HEADER, MAX_BUTTON_TEXT, MAX_VALUE = 50, 3000, 2000, 150, 75, 2000
_ENTITY = re.compile(r"&(?!amp;|lt;|gt;)")  # an ampersand that does not start a whole entity
_MENTION = "<@U0ALICE>"

# What escaping grows fivefold, what opens code spans, what Slack reads as markup.
_nasty = st.text(alphabet=st.sampled_from(list("&<>`*_~@\n abcXYZ019.:-")), max_size=4_000)
_name = st.text(alphabet=st.sampled_from(list("&<>`ab-._")), min_size=1, max_size=300)
_ids = st.lists(st.text(alphabet=st.sampled_from(list("&<>`e-01")), min_size=1, max_size=200), max_size=10)


def check_message(message: Message) -> None:
    """What Slack itself would refuse, or draw wrong, in a message."""
    assert len(message.blocks) <= MAX_BLOCKS
    assert len(message.text) <= MAX_SECTION
    for block in message.blocks:
        parsed = Block.parse(block)
        assert parsed is not None, block
        parsed.validate_json()  # slack_sdk's own checks of the block's shape and lengths
        for text, limit, mrkdwn in _texts(block):
            assert len(text) <= limit, (limit, text[:80])
            if mrkdwn:  # plain text is shown as typed: only mrkdwn has entities and mentions to cut
                assert _ENTITY.search(text) is None, text  # never an entity cut in half
                assert text.count("<") == text.count(">"), text  # never a mention or a link cut in half


def _texts(block: dict[str, Any]) -> list[tuple[str, int, bool]]:
    """Each text object of a block: its text, its limit, and whether it is mrkdwn."""
    kind = block["type"]
    if kind == "section":
        assert len(block.get("fields", [])) <= 10
        objects = ([block["text"]] if "text" in block else []) + block.get("fields", [])
        return [
            (o["text"], MAX_SECTION if o is block.get("text") else MAX_FIELD, o["type"] == "mrkdwn")
            for o in objects
        ]
    if kind == "header":
        return [(block["text"]["text"], MAX_HEADER, False)]
    if kind == "context":
        return [(e["text"], MAX_FIELD, e["type"] == "mrkdwn") for e in block["elements"] if "text" in e]
    if kind == "actions":
        for button in block["elements"]:
            assert len(button["text"]["text"]) <= MAX_BUTTON_TEXT
            assert len(button.get("value", "")) <= MAX_VALUE
    return []


def _visible(message: Message) -> str:
    return "\n".join(text for block in message.blocks for text, _, _ in _texts(block))


_reconcile = st.builds(
    lambda missing, duplicated: ReconcileOut(
        at=datetime(2024, 5, 1, tzinfo=UTC),
        selected=100,
        found=100 - len(missing) + len(duplicated),
        missing=len(missing),
        unexpected=0,
        duplicates=len(duplicated),
        missing_sample=missing,
        duplicates_sample=duplicated,
    ),
    _ids,
    _ids,
)

_view = st.builds(
    lambda reason, source, topic, window, state, reconcile, kind: changed(
        wire_run(source=source, topic=topic, window=window),
        state=state,
        failure_reason=reason,
        reconcile=reconcile,
        failure_kind=kind,
        confirmed=7,
        pipeline_id="p-0123456789ab",
    ),
    _nasty,
    _name,
    _name,
    _name,
    st.sampled_from(["running", "succeeded", "failed", "cancelled"]),
    st.none() | _reconcile,
    st.sampled_from([None, "launch", "lost", "job"]),
)

_RUN_BUILDERS: list[Callable[[RunOut], Message]] = [
    run_messages.run_parent,
    run_messages.progress_reply,
    run_messages.final_reply,
    run_messages.reconcile_reply,
    pipeline_messages.pipeline_run_line,
]


@pytest.mark.parametrize("build", _RUN_BUILDERS, ids=lambda build: build.__name__)
@settings(max_examples=60, deadline=None)
@given(view=_view)
def test_every_run_message_is_one_slack_accepts(build: Callable[[RunOut], Message], view: RunOut) -> None:
    check_message(build(view))


@settings(max_examples=60, deadline=None)
@given(reason=_nasty, source=_name, window=_name)
def test_every_answer_about_a_run_is_one_slack_accepts(reason: str, source: str, window: str) -> None:
    run = wire_run(state="failed", failure_reason=reason, source=source, window=window)
    for message in (
        run_messages.accepted(run, created=True, unreachable=reason[:40] or None),
        run_messages.run_status(run),
        run_messages.run_list([run] * 30, title=source),
        run_messages.cancelling(run),
        drain_messages.drain_message(run),
        topic_messages.topic_deleted(run),
    ):
        check_message(message)


@settings(max_examples=60, deadline=None)
@given(source=_name, topic=_name, schedule=_name)
def test_every_pipeline_message_is_one_slack_accepts(source: str, topic: str, schedule: str) -> None:
    pipeline = wire_pipeline(source=source, topic=topic, schedule=schedule)
    view = PipelineView.of(pipeline)
    for message in (
        pipeline_messages.pipeline_summary(view),
        pipeline_messages.pipeline_changed(view, "paused"),
        pipeline_messages.pipeline_list([pipeline] * 30, title=source),
        pipeline_messages.unscheduled(view),
    ):
        check_message(message)


@settings(max_examples=100, deadline=None)
@given(reason=_nasty, usage=_name)
def test_refusals_and_input_errors_are_ones_slack_accepts(reason: str, usage: str) -> None:
    check_message(kit.refusal(f"{reason} {_MENTION}", usage))
    check_message(kit.input_error(usage, reason, usage))
    check_message(kit.notice(kit.escape(reason)))  # a notice is mrkdwn its caller escaped
    check_message(kit.listing("Runs", usage, [kit.escape(reason)] * 20, 40))  # lines come escaped


@settings(max_examples=60, deadline=None)
@given(
    reason=_nasty,
    duplicated=st.lists(st.from_regex(r"e-[0-9]{1,40}", fullmatch=True), min_size=1, max_size=10),
)
def test_a_long_failure_never_loses_the_reconcile_samples_at_its_tail(
    reason: str, duplicated: list[str]
) -> None:
    reconcile = ReconcileOut(
        at=datetime(2024, 5, 1, tzinfo=UTC),
        selected=100,
        found=100 + len(duplicated),
        missing=0,
        unexpected=0,
        duplicates=len(duplicated),
        duplicates_sample=duplicated,
    )
    failed = changed(wire_run(), state="failed", failure_reason=reason + "&" * 3_000, reconcile=reconcile)

    reply = run_messages.final_reply(failed)

    check_message(reply)
    shown = _visible(reply)
    assert "duplicated: " in shown
    assert all(f"`{event_id}`" in shown for event_id in duplicated)


# --- the pieces the builders use ------------------------------------------------------------------------

_code_text = st.lists(
    st.one_of(
        st.text(alphabet=st.sampled_from(list("ab &\n")), max_size=80).map(kit.escape),
        st.text(alphabet=st.sampled_from(list("xy<>&")), min_size=1, max_size=900).map(
            lambda t: f"`{kit.escape(t)}`"
        ),
        st.just(_MENTION),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=_code_text, limit=st.integers(min_value=20, max_value=MAX_SECTION))
def test_split_text_keeps_every_character_and_every_code_span_closed(text: str, limit: int) -> None:
    pieces = kit.split_text(text, limit)

    assert all(len(piece) <= limit for piece in pieces)
    assert all(piece.count("`") % 2 == 0 for piece in pieces)  # each piece's spans open and close in it
    assert all(_ENTITY.search(piece) is None and piece.count("<") == piece.count(">") for piece in pieces)

    def letters(value: str) -> str:  # what is read: the markup a split adds (backticks, breaks) aside
        return value.replace("`", "").replace("\n", "")

    assert letters("".join(pieces)) == letters(text)


@settings(max_examples=200, deadline=None)
@given(text=_code_text, limit=st.integers(min_value=3, max_value=500))
def test_fit_cuts_at_a_safe_point_and_closes_what_it_opened(text: str, limit: int) -> None:
    fitted = kit.fit(text, limit)

    assert len(fitted) <= limit
    assert fitted == text or fitted.endswith("…")
    body = fitted.removesuffix("…")
    assert body.count("`") % 2 == 0
    assert _ENTITY.search(body) is None and body.count("<") == body.count(">")


def test_a_message_of_more_than_fifty_blocks_says_how_many_it_left_out() -> None:
    many = kit.message("t", *(kit.section(f"line {i}") for i in range(70)))

    check_message(many)
    assert many.blocks[-1]["elements"][0]["text"] == "…and 21 more blocks not shown"
