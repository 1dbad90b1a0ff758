"""The acknowledgement benchmark runs and meets its goal on a burst (a smaller one, to stay quick)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "ack_latency.py"


def test_a_burst_of_signed_commands_is_acknowledged_well_within_three_seconds() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH), "-n", "20"], capture_output=True, text=True, timeout=180, check=False
    )

    assert result.returncode == 0, result.stdout + result.stderr
    figures = re.search(
        r"ack p50=([\d.]+) p99=([\d.]+) max=([\d.]+) \(ms\), n=20, http=\[200\]", result.stdout
    )
    assert figures, result.stdout
    assert float(figures[3]) < 3_000
