"""The reconcile verdict (`daemon.core.reconcile`): properties over every combination of counts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from daemon.core.reconcile import IdList, Tally, VerdictKind, listed_ids, verdict

counts = st.integers(min_value=0, max_value=10**9)
maybe = st.none() | counts


@st.composite
def tallies(draw: st.DrawFn) -> Tally:
    selected = draw(counts)
    missing = draw(st.integers(min_value=0, max_value=selected))
    return Tally(
        selected=selected,
        found=draw(counts),
        missing=missing,
        unexpected=draw(counts),
        duplicates=draw(counts),
        missing_dead_lettered=draw(st.none() | st.integers(min_value=0, max_value=missing)),
    )


@given(tallies())
def test_clean_exactly_when_nothing_is_missing_unexpected_or_doubled(tally: Tally) -> None:
    found = verdict(tally)
    assert found.clean == (tally.missing == tally.unexpected == tally.duplicates == 0)
    assert found.text.startswith(str(found.kind))


@given(tallies())
def test_the_worst_finding_names_the_verdict(tally: Tally) -> None:
    kind = verdict(tally).kind
    explained = tally.missing_dead_lettered or 0
    if tally.unexpected:
        assert kind == VerdictKind.UNEXPECTED
    elif (tally.missing or 0) > explained:
        assert kind == VerdictKind.MISSING
    elif tally.duplicates:
        assert kind == VerdictKind.DUPLICATES
    elif tally.missing:
        assert kind == VerdictKind.EXPLAINED


@given(tallies(), st.sampled_from(["selected", "found", "missing", "unexpected", "duplicates"]))
def test_an_unknown_count_is_never_clean(tally: Tally, unknown: str) -> None:
    fields = {**tally.__dict__, unknown: None}
    found = verdict(Tally(**fields))
    assert found.kind == VerdictKind.NOT_MEASURED
    assert not found.clean


@given(tallies(), st.text(min_size=1, max_size=40))
def test_an_error_is_not_measured_and_says_why(tally: Tally, error: str) -> None:
    found = verdict(Tally(**{**tally.__dict__, "error": error}))
    assert found.kind == VerdictKind.NOT_MEASURED
    assert error in found.text


def test_a_substitution_is_not_hidden_by_equal_counts() -> None:
    """One missing and one duplicate: the count matches the selection, the verdict does not."""
    found = verdict(Tally(selected=10, found=10, missing=1, unexpected=0, duplicates=1))
    assert found.kind == VerdictKind.MISSING
    assert "1 missing" in found.text and "1 duplicate" in found.text


def test_dead_lettered_records_explain_what_is_missing() -> None:
    found = verdict(
        Tally(selected=10, found=9, missing=1, unexpected=0, duplicates=0, missing_dead_lettered=1)
    )
    assert found.kind == VerdictKind.EXPLAINED
    assert "dead-letter topic" in found.text


def test_what_an_erasure_list_left_out_is_said_and_never_counts_as_missing() -> None:
    clean = Tally(
        selected=90, found=90, missing=0, unexpected=0, duplicates=0, suppressed=10, erasures_as_of="T"
    )
    found = verdict(clean)
    assert found.clean and found.text.endswith("; suppressed 10 (erasure list as of T)")
    empty = verdict(Tally(selected=5, found=5, missing=0, unexpected=0, duplicates=0, suppressed=0))
    assert empty.clean and empty.text.endswith("; suppressed 0 (erasure list empty)")
    leaked = verdict(Tally(selected=90, found=91, missing=0, unexpected=1, duplicates=0, suppressed=10))
    assert leaked.kind == VerdictKind.UNEXPECTED  # an erased id back on the topic is never clean
    assert "suppressed" not in verdict(Tally(selected=1, found=1, missing=0, unexpected=0, duplicates=0)).text


def test_a_verdicts_lists_come_in_the_jobs_order_and_a_failed_one_lists_nothing() -> None:
    document = {
        "missing_ids": ["e-1", "e-3"],
        "unexpected_ids": [["x-1", 2]],
        "duplicated_ids": [["e-2", 3], ["e-4", 2]],
    }
    assert listed_ids(document) == {
        IdList.MISSING: [("e-1", 0), ("e-3", 0)],
        IdList.UNEXPECTED: [("x-1", 2)],
        IdList.DUPLICATED: [("e-2", 3), ("e-4", 2)],
    }
    assert listed_ids({**document, "error": "broker gone"}) == {kind: [] for kind in IdList}
    assert listed_ids({"missing_sample": ["e-1"]}) == {kind: [] for kind in IdList}  # from before lists


def test_a_nul_in_an_id_is_kept_as_a_replacement_character_the_store_accepts() -> None:
    listed = listed_ids({"missing_ids": ["e\x001"], "unexpected_ids": [["x\x00", 2]]})
    assert listed[IdList.MISSING] == [("e\ufffd1", 0)] and listed[IdList.UNEXPECTED] == [("x\ufffd", 2)]
