"""`python -m tests.scenarios.chaos [--short] [--seed N] [--only kill,fuzz] [--dir D]` (`make chaos`).

Bounded and loopback only: a broker and a PostgreSQL cluster of its own, stopped at the end.
Exit status 0 when every scenario holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.scenarios.chaos.scenarios import LONG, SCENARIOS, SHORT
from tests.scenarios.chaos.suite import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.scenarios.chaos", description=__doc__)
    parser.add_argument("--short", action="store_true", help="the short form make test runs")
    parser.add_argument("--seed", type=int, default=int(time.time()), help="replays a run's random choices")
    parser.add_argument("--only", default="", help=f"comma-separated subset of: {', '.join(SCENARIOS)}")
    parser.add_argument("--dir", type=Path, default=None, help="keep state and logs here")
    args = parser.parse_args(argv)
    only = [name for name in args.only.split(",") if name]
    unknown = sorted(set(only) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    root = args.dir or Path(tempfile.mkdtemp(prefix="replay-chaos-"))
    print(f"chaos: seed={args.seed} state={root}", flush=True)
    tallies = run(
        root,
        SHORT if args.short else LONG,
        seed=args.seed,
        only=only,
        say=lambda line: print(line, flush=True),
    )
    return 0 if all(tally.ok for tally in tallies) else 1


if __name__ == "__main__":
    sys.exit(main())
