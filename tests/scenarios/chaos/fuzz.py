"""Hostile input: valid commands and API bodies, mutated the ways people and programs break them.

Seeded, so a failing case can be replayed: the same seed gives the same inputs. Mutations are the
ones seen in practice (a phone's dashes and ellipses, pasted mentions, control characters, huge
numbers, wrong JSON types, a body that is not JSON) rather than uniform noise, which a parser
rejects at its first byte.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

SLASH_SEEDS = (
    "orders 2024-01-01..2024-01-02 tps=100",
    "orders last=6h tps=1k workers=2",
    "plan orders 2024-01-03 tps=500",
    "orders 2024-01-01 tps=200 topic=live",
    "orders 2024-01-04 headers=team:payments,ticket:INC-1 on_error=dlq",
    "schedule orders every=1h watermark=updated_at tps=10",
    "schedule orders cron=0 0 31 4 * watermark=updated_at",
    "cancel r-0123456789ab",
    "status r-0123456789ab",
    "tps r-0123456789ab 5k",
    "lag orders-consumer",
    "rewind orders-consumer orders-live to=earliest",
    "list",
    "help",
)
ODD = (
    "\u2013",
    "\u2014",
    "\u2026",
    "\u00a0",
    "\u200b",
    "\u202e",
    "\x00",
    "\x07",
    "\n",
    "\t",
    "\ufeff",
    "🚀",
    "<@U0ADMIN1>",
    "<!channel>",
    "&lt;",
    "`",
    "'",
    '"',
    ";",
    "--",
    "%s%n",
    "{0}",
    "${jndi:x}",
    "..",
    "=",
    "==",
    ",",
    "r-",
    "tps=",
    "topic=",
    "\\",
    "/",
    "*",
)
NUMBERS = (
    "0",
    "-1",
    "1e309",
    "99999999999999999999999",
    "NaN",
    "inf",
    "0x10",
    "1_000",
    "10m",
    "2.5k",
    "",
)
API_PATHS = ("/v1/replays", "/v1/plans", "/v1/pipelines")
REPLAY_BODY: dict[str, Any] = {"source": "orders", "window": "2024-01-01..2024-01-02", "tps": 100}
SCHEDULE_BODY: dict[str, Any] = {"source": "orders", "every": "1h", "watermark": "updated_at", "tps": 10}
ODD_VALUES: tuple[Any, ...] = (
    None,
    True,
    -1,
    0,
    2**63,
    1e308,
    "",
    "x" * 5000,
    [],
    {},
    [1, 2],
    {"a": 1},
    "2024-13-45..2024-01-01",
    "../../etc/passwd",
    "orders\x00",
    "\u2026",
)


@dataclass(frozen=True)
class SlashCase:
    text: str


@dataclass(frozen=True)
class ApiCase:
    path: str
    body: bytes


Case = SlashCase | ApiCase


def _mutate_text(rng: random.Random, text: str) -> str:
    words = text.split(" ")
    mutation = rng.randrange(9)
    if mutation == 0:  # an odd character somewhere
        at = rng.randrange(len(text) + 1)
        return text[:at] + rng.choice(ODD) + text[at:]
    if mutation == 1:  # a number replaced by an odd one
        return " ".join(
            w.split("=", 1)[0] + "=" + rng.choice(NUMBERS) if "=" in w and rng.random() < 0.5 else w
            for w in words
        )
    if mutation == 2:  # a word dropped or doubled
        at = rng.randrange(len(words))
        return " ".join(words[:at] + words[at + 1 :] if rng.random() < 0.5 else words[: at + 1] + words[at:])
    if mutation == 3:  # truncated
        return text[: rng.randrange(len(text) + 1)]
    if mutation == 4:  # shuffled
        rng.shuffle(words)
        return " ".join(words)
    if mutation == 5:  # very long
        return text + " " + rng.choice(ODD) * rng.choice((100, 3000, 12000))
    if mutation == 6:  # case and spacing games
        return "  ".join(w.upper() if rng.random() < 0.5 else w for w in words)
    if mutation == 7:  # a repeated option with a conflicting value
        return f"{text} {text.split(' ')[-1]}" if "=" in text else f"{text} tps=1 tps=2"
    return "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(1, 60)))


def _mutate_body(rng: random.Random, body: dict[str, Any]) -> bytes:
    mutated = dict(body)
    mutation = rng.randrange(7)
    if mutation == 0:  # a field gets a value of the wrong kind
        mutated[rng.choice(list(mutated))] = rng.choice(ODD_VALUES)
    elif mutation == 1:  # an unknown field
        mutated[rng.choice(("admin", "actor", "requester", "__class__", "topic_name", "state"))] = "x"
    elif mutation == 2:  # a field missing
        mutated.pop(rng.choice(list(mutated)))
    elif mutation == 3:  # headers: many, large, odd names
        mutated["headers"] = {
            f"h{i}{rng.choice(ODD)}": "v" * rng.choice((1, 300, 70000)) for i in range(rng.choice((1, 30)))
        }
    elif mutation == 4:  # deep nesting (written by hand: json.dumps itself would recurse too deep)
        depth = rng.choice((50, 2000))
        mutated["window"] = "@nest@"
        return json.dumps(mutated).encode().replace(b'"@nest@"', b"[" * depth + b"1" + b"]" * depth)
    elif mutation == 5:  # not JSON at all, or not UTF-8
        return rng.choice(
            (b"{", b"[]", b"null", b"\xff\xfe\x00", b"source=orders", json.dumps(body).encode()[:-3])
        )
    else:  # text fields mutated as a person would
        for name in ("window", "every", "watermark"):
            if isinstance(mutated.get(name), str):
                mutated[name] = _mutate_text(rng, mutated[name])
    return json.dumps(mutated).encode()


def cases(seed: int, count: int) -> Iterator[Case]:
    """`count` inputs, half slash commands and half API bodies, the same for the same seed."""
    rng = random.Random(seed)
    makers: tuple[Callable[[], Case], ...] = (
        lambda: SlashCase(_mutate_text(rng, rng.choice(SLASH_SEEDS))),
        lambda: ApiCase(
            (path := rng.choice(API_PATHS)),
            _mutate_body(rng, SCHEDULE_BODY if path == "/v1/pipelines" else REPLAY_BODY),
        ),
    )
    for index in range(count):
        yield makers[index % 2]()
