"""Per-run metrics from the store at scrape time: the runs they cover are bounded (every unfinished run
plus the last few to end), each carries `run_id` and `source`, and per-source totals add up. Runs are
written through the real store (SQLite and PostgreSQL) exactly as the watcher writes them."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from daemon.core.drain import DrainStage, GroupDrain
from daemon.runtime.metrics import render_metrics
from store import Store
from store.models import Run


def _samples(store: Store, **kwargs: int) -> list[Sample]:
    body, content_type = render_metrics(store, **kwargs)
    assert content_type.startswith("text/plain")
    return [sample for family in text_string_to_metric_families(body.decode()) for sample in family.samples]


def _value(samples: list[Sample], name: str, **labels: str) -> float | None:
    found = [
        s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def _run(store: Store, source: str = "orders", tps: int = 500) -> Run:
    return store.runs.create(kind="replay", source=source, topic=f"{source}-replay", tps=tps, requester="U1")


def _succeeded(store: Store, source: str, *, confirmed: int, dead: int = 0) -> Run:
    run = _run(store, source)
    store.runs.transition(run.id, "submitted")
    store.runs.transition(run.id, "running")
    return store.runs.transition(
        run.id, "succeeded", confirmed=confirmed, dead_lettered=dead, achieved_tps=confirmed / 10
    )


def test_a_running_run_shows_its_target_and_achieved_rate_confirmed_and_watched_lag(store: Store) -> None:
    run = _run(store, tps=500)
    store.runs.transition(run.id, "submitted")
    store.runs.transition(run.id, "running")
    store.runs.update_progress(run.id, confirmed=1200, rate=480.5)
    store.runs.update(run.id, dead_lettered=3)
    watched = GroupDrain(group="orders-consumer", state=DrainStage.BASELINE, baseline=40, lag=950)
    store.runs.set_watch(run.id, {"groups": [watched.to_dict()]}, watching=False)

    samples = _samples(store)

    labels = {"run_id": run.id, "source": "orders"}
    assert _value(samples, "replay_run_target_events_per_second", **labels) == 500
    assert _value(samples, "replay_run_achieved_events_per_second", **labels) == 480.5
    assert _value(samples, "replay_run_events_confirmed_total", **labels) == 1200
    assert _value(samples, "replay_run_events_dead_lettered_total", **labels) == 3
    assert _value(samples, "replay_watch_lag", group="orders-consumer", **labels) == 950
    assert _value(samples, "replay_watch_baseline_lag", group="orders-consumer", **labels) == 40
    assert _value(samples, "replay_run_info", kind="replay", topic="orders-replay", **labels) == 1
    assert _value(samples, "replay_run_state", replay_run_state="running", **labels) == 1
    assert _value(samples, "replay_run_state", replay_run_state="queued", **labels) == 0


def test_a_state_change_changes_a_value_not_the_set_of_series(store: Store) -> None:
    run = _run(store, tps=500)

    def series() -> set[tuple[str, tuple[tuple[str, str], ...]]]:
        return {(s.name, tuple(sorted(s.labels.items()))) for s in _samples(store) if s.labels.get("run_id")}

    queued = series()
    store.runs.transition(run.id, "submitted")
    store.runs.transition(run.id, "running")

    assert series() == queued
    assert _value(_samples(store), "replay_run_state", replay_run_state="running", run_id=run.id) == 1


def test_a_queued_run_has_a_target_but_no_achieved_rate_yet(store: Store) -> None:
    run = _run(store, tps=250)

    samples = _samples(store)

    assert _value(samples, "replay_run_target_events_per_second", run_id=run.id) == 250
    assert _value(samples, "replay_run_achieved_events_per_second", run_id=run.id) is None
    assert _value(samples, "replay_runs", state="queued") == 1


def test_per_run_series_cover_unfinished_runs_and_only_the_last_finished(store: Store) -> None:
    finished = [_succeeded(store, "orders", confirmed=100 * (i + 1)) for i in range(4)]
    going = _run(store)

    samples = _samples(store, finished_kept=2)

    graphed = {s.labels["run_id"] for s in samples if s.name == "replay_run_target_events_per_second"}
    assert graphed == {going.id, finished[-1].id, finished[-2].id}
    assert _value(samples, "replay_run_achieved_events_per_second", run_id=finished[-1].id) == 40.0
    assert _value(samples, "replay_events_confirmed_total") == 1000  # the totals still count every run


def test_totals_by_source_add_up_every_run_of_that_source(store: Store) -> None:
    _succeeded(store, "orders", confirmed=100, dead=2)
    _succeeded(store, "orders", confirmed=50)
    _succeeded(store, "payments", confirmed=7, dead=1)
    _run(store, "payments")

    samples = _samples(store)

    assert _value(samples, "replay_source_runs_total", source="orders") == 2
    assert _value(samples, "replay_source_runs_total", source="payments") == 2
    assert _value(samples, "replay_source_events_confirmed_total", source="orders") == 150
    assert _value(samples, "replay_source_events_dead_lettered_total", source="orders") == 2
    assert _value(samples, "replay_source_events_dead_lettered_total", source="payments") == 1
