"""A realistic, deterministic "orders" backup table for tests, demos and benchmarks.

Replays are only as convincing as the data behind them, so the table looks like a lake backup:
hive-partitioned by day (``DIR/dt=YYYY-MM-DD/part-0.parquet``), one row per order event, several
events per order spread across days (so per-entity ordering matters), stable unique event ids
(``evt-20240101-000001``) and ``updated_at`` non-decreasing per order. Everything derives from the
arguments and the seed, so rewriting with the same arguments gives the same rows.

Run as ``python -m scripts.devtools.sample_table --out DIR --start 2024-01-01 --days 7 --rows-per-day N``;
``--encrypted-email-key-dir KEYS`` adds an encrypted ``email`` column (see ``scripts.devtools.sample_pii``);
``--daily-curve`` spreads each day's events like real traffic (quiet nights, a morning and an evening
peak, a few short bursts) instead of evenly: what a time-shaped replay (``tps=original``) is for.
pyarrow only: seeding must not need a JVM.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema(
    [
        ("event_id", pa.string()),
        ("order_id", pa.string()),
        ("customer_id", pa.string()),
        ("status", pa.string()),
        ("amount", pa.float64()),
        ("currency", pa.string()),
        ("updated_at", pa.timestamp("us", tz="UTC")),
        ("payload", pa.string()),
    ]
)
# Weighted by repetition: most orders go the distance, some are cancelled on the way.
NEXT_STATUS = {
    "created": ("paid", "paid", "paid", "cancelled"),
    "paid": ("shipped", "shipped", "shipped", "cancelled"),
    "shipped": ("delivered",),
}
CURRENCIES = ("EUR", "USD", "GBP")
CHANNELS = ("web", "ios", "android", "store")
NEW_ORDER_SHARE = 0.3  # ~3 events per order on average, spread over days
SECONDS_PER_DAY = 86_400


@dataclass
class _Order:
    order_id: str
    customer_id: str
    amount: float
    currency: str
    channel: str
    status: str = "created"


def day_row_counts(days: int, rows_per_day: int, seed: int, *, uneven: bool) -> list[int]:
    """Rows per day; with ``uneven`` each day varies by up to ±40 % (busy and quiet days)."""
    if not uneven:
        return [rows_per_day] * days
    rng = random.Random(f"{seed}-days")
    return [max(1, round(rows_per_day * rng.uniform(0.6, 1.4))) for _ in range(days)]


def daily_weights(rng: random.Random) -> list[float]:
    """A day's traffic per minute: a night trough, morning and evening peaks, and three bursts of a
    few minutes at ten times the traffic around them (a campaign, a retry storm)."""
    weights = []
    for minute in range(SECONDS_PER_DAY // 60):
        hour = minute / 60
        morning = math.exp(-(((hour - 10.5) / 2.0) ** 2))
        evening = 1.3 * math.exp(-(((hour - 19.5) / 1.5) ** 2))
        weights.append(0.08 + morning + evening)
    for _ in range(3):
        start, length = rng.randrange(7 * 60, 22 * 60), rng.randrange(2, 6)
        for minute in range(start, start + length):
            weights[minute] *= 10
    return weights


def _offsets(count: int, rng: random.Random, curve: list[float] | None) -> list[int]:
    """Microseconds after midnight of ``count`` events: evenly spread, or along ``curve`` (per minute)."""
    if curve is None:
        return sorted(rng.randrange(SECONDS_PER_DAY * 1_000_000) for _ in range(count))
    minutes = rng.choices(range(len(curve)), cum_weights=list(itertools.accumulate(curve)), k=count)
    return sorted(minute * 60_000_000 + rng.randrange(60_000_000) for minute in minutes)


def _day_table(
    day: date,
    count: int,
    rng: random.Random,
    open_orders: list[_Order],
    next_order: list[int],
    curve: list[float] | None = None,
) -> pa.Table:
    offsets = _offsets(count, rng, curve)
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
    columns: dict[str, list[object]] = {name: [] for name in SCHEMA.names}
    for index, offset_us in enumerate(offsets, start=1):
        if not open_orders or rng.random() < NEW_ORDER_SHARE:
            next_order[0] += 1
            number = next_order[0]
            order = _Order(
                order_id=f"ord-{number:05d}",
                customer_id=f"cus-{(number * 7919) % 10_007:05d}",
                amount=round(rng.uniform(5, 500), 2),
                currency=rng.choice(CURRENCIES),
                channel=rng.choice(CHANNELS),
            )
            open_orders.append(order)
        else:
            slot = rng.randrange(len(open_orders))
            order = open_orders[slot]
            order.status = rng.choice(NEXT_STATUS[order.status])
            if order.status not in NEXT_STATUS:
                open_orders[slot] = open_orders[-1]
                open_orders.pop()
        columns["event_id"].append(f"evt-{day:%Y%m%d}-{index:06d}")
        columns["order_id"].append(order.order_id)
        columns["customer_id"].append(order.customer_id)
        columns["status"].append(order.status)
        columns["amount"].append(order.amount)
        columns["currency"].append(order.currency)
        columns["updated_at"].append(midnight + timedelta(microseconds=offset_us))
        extras = {
            "channel": order.channel,
            "items": 1 + int(order.amount // 100),
            "note": f"{order.status} event",
        }
        columns["payload"].append(json.dumps(extras, sort_keys=True))
    return pa.table(columns, schema=SCHEMA)


def write_sample_table(
    out: Path,
    start: date,
    days: int,
    rows_per_day: int,
    seed: int = 7,
    *,
    uneven: bool = False,
    daily_curve: bool = False,
    encrypted_email_key_dir: Path | None = None,
) -> int:
    """Write ``days`` daily partitions under ``out`` and return the number of rows written."""
    if days < 1 or rows_per_day < 1:
        raise ValueError(f"days and rows_per_day must be >= 1, got days={days} rows_per_day={rows_per_day}")
    rng = random.Random(seed)
    open_orders: list[_Order] = []
    next_order = [0]
    total = 0
    for offset, count in enumerate(day_row_counts(days, rows_per_day, seed, uneven=uneven)):
        day = start + timedelta(days=offset)
        curve = daily_weights(rng) if daily_curve else None
        table = _day_table(day, count, rng, open_orders, next_order, curve)
        partition = out / f"dt={day.isoformat()}"
        partition.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, partition / "part-0.parquet", compression="snappy")
        total += table.num_rows
    if encrypted_email_key_dir is not None:  # opt-in: the default table keeps its exact shape
        from scripts.devtools.sample_pii import add_encrypted_email

        add_encrypted_email(out, encrypted_email_key_dir)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="table directory (created if missing)")
    parser.add_argument("--start", type=date.fromisoformat, default=date(2024, 1, 1), help="first day")
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--rows-per-day", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--uneven", action="store_true", help="vary rows per day by up to ±40 %%")
    parser.add_argument(
        "--daily-curve", action="store_true", help="real traffic's shape: quiet nights, peaks and bursts"
    )
    parser.add_argument(
        "--encrypted-email-key-dir", type=Path, help="add an encrypted email column (local key kept here)"
    )
    args = parser.parse_args(argv)
    rows = write_sample_table(
        args.out,
        args.start,
        args.days,
        args.rows_per_day,
        args.seed,
        uneven=args.uneven,
        daily_curve=args.daily_curve,
        encrypted_email_key_dir=args.encrypted_email_key_dir,
    )
    print(f"wrote {rows} rows in {args.days} daily partitions to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
