"""Which commits a pipeline following a table's commits publishes, skips past, or stops at."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.core.commits import Commit, appends, delta_kind, iceberg_kind, refusal


@pytest.mark.parametrize(
    ("operation", "kind"),
    [("append", "append"), ("replace", "rewrite"), ("overwrite", "change"), ("delete", "change")],
)
def test_iceberg_operations(operation: str, kind: str) -> None:
    assert iceberg_kind(operation) == kind


@pytest.mark.parametrize(
    ("operation", "parameters", "kind"),
    [
        ("WRITE", {"mode": "Append"}, "append"),  # Spark's and delta-rs's append
        ("STREAMING UPDATE", {"outputMode": "Append"}, "append"),
        ("WRITE", {"mode": "Overwrite", "predicate": "dt = '2024-01-03'"}, "change"),  # replaceWhere
        ("STREAMING UPDATE", {"outputMode": "Complete"}, "change"),
        ("DELETE", {"predicate": "a = 1"}, "change"),
        ("MERGE", {}, "change"),
        ("UPDATE", {}, "change"),
        ("TRUNCATE", {}, "change"),
        ("RESTORE", {"version": 3}, "change"),
        ("CREATE OR REPLACE TABLE AS SELECT", {}, "change"),
        ("OPTIMIZE", {"predicate": "[]"}, "rewrite"),
        ("SET TBLPROPERTIES", {"properties": "{}"}, "rewrite"),
        ("VACUUM END", {}, "rewrite"),
        ("SOMETHING NEW", {}, "change"),  # an operation we do not know is never taken for an append
    ],
)
def test_delta_operations(operation: str, parameters: dict[str, object], kind: str) -> None:
    assert delta_kind(operation, parameters) == kind


commits = st.lists(
    st.builds(
        Commit,
        id=st.integers(min_value=0, max_value=10**6).map(str),
        operation=st.text(max_size=10),
        kind=st.sampled_from(["append", "rewrite", "change"]),
    ),
    max_size=8,
)


@given(commits)
def test_a_range_is_refused_exactly_when_a_commit_changed_rows_and_names_the_first(
    range_: list[Commit],
) -> None:
    said = refusal(range_, source="orders", committed="7")
    changed = [commit for commit in range_ if commit.kind == "change"]
    assert (said is None) == (not changed)
    if said is not None:
        assert f"commit {changed[0].id} " in said and "snapshot 7" in said and "'orders'" in said
    assert appends(range_) == any(commit.kind == "append" for commit in range_)
