"""Rule 11 at scale: a window about three times larger than the job's heap replays, reconciled clean.

Ten million narrow rows (about 1.5 GB once Spark has decoded them) under `--driver-memory 512m` in
local mode, where the driver's heap is the executors' too. The job must stream: a persist of the
window, or a count or sort held in memory, ends in an OutOfMemoryError. Minutes on a 2-core machine,
so it is marked `nightly`: `make nightly` runs it after the long chaos suite; `make test` does not.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bench.window_memory import MAIN, narrow_spec, narrow_table, run
from tests.fixtures.kafka import create_topic, unique_topic

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.nightly]

ROWS = 10_000_000
HEAP = "512m"


def test_a_window_three_times_the_heap_replays_with_a_clean_reconcile(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    table = narrow_table(tmp_path, ROWS)
    target = unique_topic("window-memory")
    create_topic(kafka_bootstrap, target, partitions=3)
    spec = narrow_spec(table, kafka_bootstrap, target, run_id=f"r-memory-{int(time.time())}")
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))

    code, stdout, stderr, peak_mb = run(MAIN, spec_path, HEAP)

    finals = [line for line in stdout.splitlines() if line.startswith(("REPLAY_RESULT ", "REPLAY_FAILED "))]
    assert finals, f"no final line (exit {code}):\n{stderr[-3000:]}"
    document = json.loads(finals[-1].partition(" ")[2])
    assert document["status"] == "succeeded", document.get("reason")
    assert document["confirmed"] == ROWS
    reconciled = document["reconcile"]
    assert (reconciled["missing"], reconciled["duplicates"], reconciled["unexpected"]) == (0, 0, 0), (
        reconciled
    )
    print(f"window-memory rows={ROWS} heap={HEAP} peak_rss_mb={peak_mb:.0f} exit={code}")
