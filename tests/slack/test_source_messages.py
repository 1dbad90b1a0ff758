"""`/replay sources` as Slack draws it: every field, escaping, and a catalog longer than one message."""

from __future__ import annotations

import json
from typing import Any

from daemon.contract.models import SourceOut
from daemon.slack.source_messages import (
    MAX_LISTED_SOURCES,
    NO_RETENTION,
    source_card,
    sources_list,
    unknown_source,
)


def _source(name: str = "orders", **changes: Any) -> SourceOut:
    fields: dict[str, Any] = {
        "name": name,
        "description": "Order lifecycle events",
        "live_topic": "orders",
        "owners": ["U0OWNER1", "U0OWNER2"],
        "partition_column": "dt",
        "watermark_column": "updated_at",
        "table_format": "parquet",
        "value_format": "json",
        "retention": "13 months",
    }
    return SourceOut.model_validate({**fields, **changes})


def _drawn(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def test_each_source_is_one_section_in_name_order_with_everything_a_requester_needs() -> None:
    listed = sources_list([_source("payments", live_topic=None, retention=None), _source("orders")])

    header, orders, payments, footer = listed.blocks
    assert header["text"]["text"] == "Sources you can replay (2)"
    assert orders["text"]["text"] == (
        "*orders*: Order lifecycle events\n"
        "Owners: <@U0OWNER1>, <@U0OWNER2> · Formats: parquet table → json values · "
        "Live topic: `orders` · History: 13 months"
    )
    assert "Live topic: none: replays go to their own topic" in payments["text"]["text"]
    assert f"History: {NO_RETENTION}" in payments["text"]["text"]
    assert "&lt;name&gt;" in footer["elements"][0]["text"]
    assert listed.text == "Sources you can replay: orders, payments"


def test_a_raw_source_says_its_bytes_are_replayed_as_they_were() -> None:
    listed = sources_list([_source(value_format="raw")])

    assert "parquet table → raw bytes, replayed as they were values" in _drawn(listed.blocks)


def test_text_from_the_catalog_is_escaped_so_it_can_never_ping_or_link() -> None:
    listed = sources_list([_source(description="<!channel> & <https://x|y>", retention="<@U0X> & co")])

    drawn = _drawn(listed.blocks)
    assert "&lt;!channel&gt; &amp; &lt;https://x|y&gt;" in drawn
    assert "History: &lt;@U0X&gt; &amp; co" in drawn
    assert "<!channel>" not in drawn


def test_a_catalog_longer_than_one_message_names_the_rest_in_the_last_line() -> None:
    many = [_source(f"s{index:03d}") for index in range(MAX_LISTED_SOURCES + 5)]

    listed = sources_list(many)

    assert len(listed.blocks) == MAX_LISTED_SOURCES + 2 <= 50  # header, sections, the last line
    assert listed.blocks[-1]["elements"][0]["text"].startswith("…and 5 more: s040, s041, s042, s043, s044.")


def test_an_empty_catalog_says_so() -> None:
    assert "no sources yet" in sources_list([]).text


def test_one_source_as_a_card_shows_the_columns_its_windows_and_pipelines_use() -> None:
    card = source_card(_source(watermark_column=None))

    drawn = _drawn(card.blocks)
    assert card.blocks[0]["text"]["text"] == "Source orders"
    assert "*Day windows by*\\n`dt`" in drawn
    assert "*Pipelines' watermark*\\nnone: it cannot be scheduled" in drawn


def test_an_unknown_name_lists_every_name_when_none_is_close() -> None:
    refused = unknown_source("zzz", [_source("orders"), _source("payments")])

    assert refused.text == ":no_entry: no source 'zzz' in the catalog (the catalog has: orders, payments)"


def test_an_iceberg_or_delta_source_shows_the_snapshot_a_replay_planned_now_would_pin() -> None:
    iceberg = _source("orders", table_format="iceberg", snapshot="4417322881936529441")
    delta = _source("payments", table_format="delta", snapshot="7")
    empty = _source("refunds", table_format="delta", snapshot=None)

    listed = _drawn(sources_list([iceberg, delta, empty]).blocks)
    card = _drawn(source_card(iceberg).blocks)

    assert "Formats: iceberg table → json values · Snapshot: `4417322881936529441` · " in listed
    assert "Formats: delta table → json values · Snapshot: `7` · " in listed
    assert "Snapshot: none yet: the table was never written" in listed
    assert "Current snapshot" in card and "`4417322881936529441`" in card


def test_a_parquet_source_has_no_snapshot_line_and_an_unreadable_table_says_why() -> None:
    parquet = _drawn(source_card(_source()).blocks)
    broken = _source(table_format="iceberg", snapshot_unreadable="/lake/orders is not an Iceberg table")

    assert "snapshot" not in parquet.lower()
    assert "Snapshot: could not be read: /lake/orders is not an Iceberg table" in _drawn(
        sources_list([broken]).blocks
    )


def test_a_live_topic_on_another_cluster_says_which() -> None:
    listed = sources_list([_source("orders", cluster="eu-west")])

    assert "Live topic: `orders` on `eu-west`" in listed.blocks[1]["text"]["text"]
