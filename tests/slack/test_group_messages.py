"""Block Kit for `lag` and `rewind`: the table is capped with "… and N more", hottest first, an unknown
lag reads "unknown", a blocked rewind has no buttons, and the plan carries the rewind hint."""

from __future__ import annotations

from daemon.contract.groups import LagOut, OffsetMoveOut, PartitionLagOut, RewindOut
from daemon.slack.group_messages import MAX_ROWS, REWIND_CONFIRM_ACTION, lag_message, rewind_preview
from daemon.slack.run_messages import plan_summary
from tests.fixtures.slack import wire_plan


def _lag(partitions: int) -> LagOut:
    rows = [
        PartitionLagOut(
            topic="orders",
            partition=p,
            committed=None if p == 0 else 100,
            end=100 + p,
            lag=None if p == 0 else p,
        )
        for p in range(partitions)
    ]
    ordered = sorted(rows, key=lambda r: (r.lag is None, -(r.lag or 0)))
    return LagOut(
        group="svc",
        topic="orders",
        state="empty",
        members=[],
        partitions=ordered,
        total_lag=sum(r.lag for r in rows if r.lag is not None) if partitions > 1 else None,
        unknown_partitions=1,
        hottest=ordered[0] if ordered[0].lag is not None else None,
        drain=None,
    )


def test_a_long_lag_table_is_capped_hottest_first_with_the_rest_counted() -> None:
    message = lag_message(_lag(25))

    table = next(b["text"]["text"] for b in message.blocks if "```" in b.get("text", {}).get("text", ""))
    lines = table.split("```")[1].splitlines()
    assert len(lines) == 1 + MAX_ROWS
    assert lines[1].split()[1] == "24"  # the hottest partition first
    assert table.endswith(f"… and {25 - MAX_ROWS} more")
    assert "unknown on 1 partition(s)" in message.text
    assert "Drain: not measured (one sample)." in str(message.blocks)


def test_an_unknown_lag_reads_unknown_never_zero() -> None:
    message = lag_message(_lag(1))

    assert "lag unknown (and unknown on 1 partition(s)" in message.text
    assert "lag 0" not in message.text and "hottest" not in message.text


def _rewind(blocked: str | None) -> RewindOut:
    return RewindOut(
        group="svc",
        topic="orders",
        to="earliest",
        state="empty" if blocked is None else "stable",
        active_members=0 if blocked is None else 2,
        moves=[OffsetMoveOut(partition=0, current=50, new=0, re_consumed=50)],
        re_consumed=50,
        unknown_partitions=0,
        applied=False,
        blocked=blocked,
    )


def test_a_blocked_rewind_preview_has_no_buttons_and_says_why() -> None:
    blocked = rewind_preview(
        _rewind("consumer group 'svc' is stable with 2 active members"), value="v", expires_in_s=900
    )
    allowed = rewind_preview(_rewind(None), value="v", expires_in_s=900)

    assert all(block["type"] != "actions" for block in blocked.blocks)
    assert "Cannot be applied now" in str(blocked.blocks)
    [actions] = [block for block in allowed.blocks if block["type"] == "actions"]
    assert actions["elements"][0]["action_id"] == REWIND_CONFIRM_ACTION
    assert "50 events are read again" in allowed.text


def test_the_plan_offers_the_rewind_when_the_window_is_on_the_live_topic() -> None:
    hinted = plan_summary(wire_plan(rewind_instead="rewind <group> orders to=2024-01-01T00:00"))
    plain = plan_summary(wire_plan())

    assert "`/replay rewind &lt;group&gt; orders to=2024-01-01T00:00`" in str(hinted.blocks)
    assert "rewind" not in str(plain.blocks)


def test_a_cluster_other_than_the_default_is_named_and_the_default_is_not() -> None:
    on_eu = lag_message(_lag(3).model_copy(update={"cluster": "eu"}))
    at_home = lag_message(_lag(3))
    rewind = rewind_preview(_rewind(None).model_copy(update={"cluster": "eu"}), value="v", expires_in_s=900)

    assert on_eu.text.startswith("Consumer group `svc` on `orders` (cluster `eu`): lag")
    assert "cluster" not in at_home.text
    assert "Rewind `svc` on `orders` (cluster `eu`) to `earliest`" in rewind.text
