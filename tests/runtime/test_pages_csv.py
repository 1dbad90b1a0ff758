"""A verdict list as CSV: every id in order, and none a spreadsheet would run as a formula."""

from __future__ import annotations

import csv
import io

from daemon.runtime.pages import _csv
from store.models import VerdictId


def test_the_csv_keeps_the_order_and_defuses_what_a_spreadsheet_would_run() -> None:
    ids = ["e-1", '=HYPERLINK("x")', "+1", "-2", "@sum", "a,b", 'q"q']
    rows = [VerdictId(run_id="r-1", kind="unexpected", n=n, event_id=i, copies=1) for n, i in enumerate(ids)]

    text = b"".join(_csv(iter(rows))).decode()

    parsed = list(csv.reader(io.StringIO(text)))
    assert parsed[0] == ["event_id", "records"]
    assert [row[0] for row in parsed[1:]] == ["e-1", '\'=HYPERLINK("x")', "'+1", "'-2", "'@sum", "a,b", 'q"q']
    assert {row[1] for row in parsed[1:]} == {"1"}
