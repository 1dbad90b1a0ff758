"""Partitioner, record timestamps and ramps, without a broker: catalog -> grammar/API -> job spec -> producer.

The broker-side proofs (Java parity, timestamps as landed, the auto topic's timestamp type) are in
spark_job/test_partitioner.py, spark_job/test_timestamps.py and scenarios/test_timestamps_e2e.py.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from daemon.config.settings import load_settings
from daemon.contract.models import ReplayBody
from daemon.core.errors import BadRequest, CatalogError, UnknownCluster
from daemon.core.grammar import GrammarError, PlanCommand, ReplayCommand, parse, render
from daemon.core.rate_shape import RAMP_FROM
from daemon.core.run_options import PipelineOptions
from daemon.usecases.catalog import load_catalog
from daemon.usecases.job_specs import build_spec
from daemon.usecases.pipeline_service import slot_options
from daemon.usecases.replays import resolved_delivery
from spark_job.errors import SpecError
from spark_job.kafka_conf import producer_config
from spark_job.spec.model import Executor, Ramp, Shape, provenance_headers
from spark_job.spec.parse import spec_from_dict, spec_from_json
from store.models import Pipeline
from tests.fixtures.store_rows import unsaved_day_run

CATALOG = """
sources:
  orders:
    table: {path: lake/orders, format: parquet}
    partition_column: dt
    event_time_column: updated_at
    key_column: order_id
    event_id_column: event_id
    owners: [U0OWNER1]
"""


def document(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "run_id": "r-42",
        "source": {"name": "orders", "path": "/lake/orders"},
        "window": {"column": "dt", "start_day": "2024-01-01", "end_day": "2024-01-07"},
        "topic": "orders",
        "kafka": {"bootstrap.servers": "broker:9092"},
        "tps": 1000,
        "key_column": "order_id",
        "event_id_column": "event_id",
        "event_time_column": "updated_at",
    }
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not None}


# --- the producer -------------------------------------------------------------------------------


def test_the_producer_hashes_keys_like_the_java_client_by_default() -> None:
    config = producer_config({"bootstrap.servers": "b:9092"})

    assert config["partitioner"] == "murmur2_random"


def test_the_producer_takes_the_specs_partitioner_and_still_forces_the_data_path_rules() -> None:
    spec = spec_from_dict(document(partitioner="consistent_random"))

    config = producer_config(spec.kafka, partitioner=spec.partitioner)

    assert (config["partitioner"], config["enable.idempotence"], config["acks"]) == (
        "consistent_random",
        True,
        "all",
    )


def test_the_operators_producer_tuning_reaches_the_producer_under_the_data_path_rules(tmp_path: Path) -> None:
    settings = load_settings({"REPLAY_KAFKA_PRODUCER": '{"linger.ms": 25, "compression.type": "zstd"}'})
    spec = build_spec(
        unsaved_day_run(), catalog=load_catalog(_catalog(tmp_path)), settings=settings, result_uri=None
    )

    config = producer_config(spec_from_json(spec.to_json()).kafka, unthrottled=True)

    assert (config["linger.ms"], config["compression.type"], config["batch.size"]) == (25, "zstd", 1_000_000)
    assert (config["enable.idempotence"], config["acks"]) == (True, "all")
    untuned = build_spec(
        unsaved_day_run(),
        catalog=load_catalog(_catalog(tmp_path)),
        settings=load_settings({}),
        result_uri=None,
    )
    assert producer_config(untuned.kafka, unthrottled=True)["linger.ms"] == 200  # the job's own default


# --- the job spec -------------------------------------------------------------------------------


def test_a_spec_without_the_fields_gets_murmur2_and_replay_time() -> None:
    spec = spec_from_dict(document())

    assert (spec.partitioner, spec.timestamp) == ("murmur2_random", "replay")


def test_partitioner_and_timestamp_survive_the_json_round_trip() -> None:
    spec = spec_from_dict(document(partitioner="fnv1a", timestamp="event"))

    assert spec_from_json(spec.to_json()) == spec
    assert (spec.partitioner, spec.timestamp) == ("fnv1a", "event")


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"partitioner": "crc32"}, "partitioner"),
        ({"kafka": {"bootstrap.servers": "b:1", "partitioner": "murmur2"}}, "kafka.partitioner"),
        ({"timestamp": "now"}, "timestamp"),
        ({"timestamp": "event", "ordering": "none", "event_time_column": None}, "event_time_column"),
    ],
)
def test_bad_partitioner_or_timestamp_names_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError, match=f"'{field}'"):
        spec_from_dict(document(**overrides))


# --- the catalog --------------------------------------------------------------------------------


def _catalog(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "sources.yaml"
    path.write_text(CATALOG + extra)
    return path


def _named(tmp_path: Path) -> Path:
    path = _catalog(tmp_path)
    path.write_text(
        CATALOG.replace("{path: lake/orders, format: parquet}", "{table: lake.sales.orders, format: iceberg}")
    )
    return path


def test_a_named_iceberg_tables_job_reads_the_metadata_file_its_plan_recorded(tmp_path: Path) -> None:
    metadata = "s3://bucket/wh/sales/orders/metadata/00003-5f1c.metadata.json"
    run = unsaved_day_run(snapshot="8817", table_metadata=metadata)

    spec = build_spec(
        run,
        catalog=load_catalog(_named(tmp_path), lake_catalogs={"lake": "sql"}),
        settings=load_settings({}),
        result_uri=None,
    )

    assert (spec.source.path, spec.source.table, spec.source.format, spec.source.snapshot) == (
        metadata,
        None,  # the job never asks a catalog: it has none, nor its credentials
        "iceberg",
        "8817",
    )
    assert spec_from_json(spec.to_json()).source.path == metadata


def test_a_run_planned_on_a_path_is_not_launched_once_its_source_is_a_named_table(tmp_path: Path) -> None:
    """A reload turned the source's path into a catalog name while the run waited in line."""
    run = unsaved_day_run(snapshot="8817")  # no metadata file: its plan read a path

    with pytest.raises(BadRequest, match=r"was planned when source 'orders' was a table at a path.*again"):
        build_spec(
            run,
            catalog=load_catalog(_named(tmp_path), lake_catalogs={"lake": "sql"}),
            settings=load_settings({}),
            result_uri=None,
        )


def test_a_source_defaults_to_murmur2_and_replay_time(tmp_path: Path) -> None:
    orders = load_catalog(_catalog(tmp_path)).get("orders")

    assert (orders.partitioner, orders.timestamp) == ("murmur2_random", "replay")


def test_a_source_may_name_its_producers_partitioner_and_event_time(tmp_path: Path) -> None:
    orders = load_catalog(_catalog(tmp_path, "    partitioner: consistent_random\n    timestamp: event\n"))

    assert (orders.get("orders").partitioner, orders.get("orders").timestamp) == (
        "consistent_random",
        "event",
    )


@pytest.mark.parametrize(
    ("line", "field", "problem"),
    [
        ("    partitioner: crc32\n", "partitioner", "'murmur2_random'"),
        ("    timestamp: now\n", "timestamp", "'event' or 'replay'"),
    ],
)
def test_a_bad_partitioner_or_timestamp_stops_the_catalog(
    tmp_path: Path, line: str, field: str, problem: str
) -> None:
    with pytest.raises(CatalogError) as caught:
        load_catalog(_catalog(tmp_path, line))

    assert (caught.value.source, caught.value.field) == ("orders", field)
    assert problem in str(caught.value)


# --- the run option: grammar and API ------------------------------------------------------------


def test_timestamp_is_a_run_option_that_renders_back() -> None:
    command = parse("orders last=6h timestamp=EVENT")

    assert isinstance(command, ReplayCommand)
    assert command.timestamp == "event"
    assert render(command) == "orders last=6h timestamp=event"
    assert parse(render(command)) == command


def test_without_the_option_the_source_decides() -> None:
    command = parse("orders last=6h")

    assert isinstance(command, ReplayCommand)
    assert command.timestamp is None
    assert "timestamp" not in render(command)


def test_a_bad_timestamp_value_is_blamed_on_its_token() -> None:
    with pytest.raises(GrammarError, match=r"`timestamp=later`: .*must be one of event, replay"):
        parse("orders last=6h timestamp=later")


def test_the_api_body_carries_the_option_both_ways() -> None:
    plan = parse("plan orders 2024-01-01..2024-01-02 timestamp=replay")
    assert isinstance(plan, PlanCommand)
    assert ReplayBody.of(plan).command(PlanCommand) == plan

    replay = parse("orders 2024-01-01..2024-01-02 timestamp=event")
    assert isinstance(replay, ReplayCommand)
    body = ReplayBody.of(replay)

    assert body.timestamp == "event"
    assert body.command(ReplayCommand) == replay
    assert ReplayBody.model_validate({"source": "orders", "window": "last=1h"}).timestamp is None


# --- ramp= --------------------------------------------------------------------------------------


def test_a_ramp_goes_from_the_command_to_the_api_to_the_jobs_spec(tmp_path: Path) -> None:
    command = parse("orders 2024-01-01 tps=100 ramp=2m")
    assert isinstance(command, ReplayCommand)
    assert ReplayBody.of(command).ramp_s == 120
    assert ReplayBody.of(command).command(ReplayCommand) == command

    spec = build_spec(
        unsaved_day_run(ramp_s=120),
        catalog=load_catalog(_catalog(tmp_path)),
        settings=load_settings({}),
        result_uri=None,
    )

    assert spec.ramp == Ramp(seconds=120, start=RAMP_FROM)
    assert spec_from_json(spec.to_json()).ramp == spec.ramp


def test_a_byte_ceiling_reaches_the_jobs_spec_in_bytes(tmp_path: Path) -> None:
    command = parse("orders 2024-01-01 tps=100 max_mb=5")
    assert isinstance(command, ReplayCommand)
    assert ReplayBody.of(command).command(ReplayCommand) == command

    catalog = load_catalog(_catalog(tmp_path))
    spec = build_spec(unsaved_day_run(max_mb=5), catalog=catalog, settings=load_settings({}), result_uri=None)

    assert spec.max_bytes_per_s == 5_000_000
    assert spec_from_json(spec.to_json()).max_bytes_per_s == 5_000_000
    plain = build_spec(unsaved_day_run(), catalog=catalog, settings=load_settings({}), result_uri=None)
    assert "max_bytes_per_s" not in plain.to_dict()


def test_transactional_delivery_goes_from_the_command_to_the_api_to_the_jobs_spec(tmp_path: Path) -> None:
    command = parse("orders 2024-01-01 tps=100 delivery=transactional")
    assert isinstance(command, ReplayCommand)
    assert ReplayBody.of(command).command(ReplayCommand) == command

    catalog = load_catalog(_catalog(tmp_path))
    run = unsaved_day_run(delivery="transactional")
    spec = build_spec(run, catalog=catalog, settings=load_settings({}), result_uri=None)

    assert spec.delivery == "transactional"
    assert spec_from_json(spec.to_json()).delivery == "transactional"
    plain = build_spec(unsaved_day_run(), catalog=catalog, settings=load_settings({}), result_uri=None)
    assert plain.delivery == "idempotent"
    assert "delivery" not in plain.to_dict()  # specs from before transactions stay as they were


def test_a_sources_executor_size_reaches_the_spec_and_a_source_without_one_leaves_it_out(
    tmp_path: Path,
) -> None:
    catalog = load_catalog(_catalog(tmp_path, "    executor: {cores: 2, memory: 6g}\n"))
    spec = build_spec(unsaved_day_run(), catalog=catalog, settings=load_settings({}), result_uri=None)
    assert spec.executor == Executor(cores=2, memory="6g")
    assert spec_from_json(spec.to_json()).executor == spec.executor

    only_memory = load_catalog(_catalog(tmp_path, "    executor: {memory: 768m}\n"))
    sized = build_spec(unsaved_day_run(), catalog=only_memory, settings=load_settings({}), result_uri=None)
    assert sized.to_dict()["executor"] == {"memory": "768m"}  # the settings' cores stay the launcher's
    plain = build_spec(
        unsaved_day_run(),
        catalog=load_catalog(_catalog(tmp_path)),
        settings=load_settings({}),
        result_uri=None,
    )
    assert "executor" not in plain.to_dict()


def test_a_run_on_a_named_cluster_sends_there_with_the_producer_tuning_every_run_shares(
    tmp_path: Path,
) -> None:
    settings = load_settings(
        {
            "REPLAY_KAFKA_BOOTSTRAP": "home:9092",
            "REPLAY_KAFKA_PRODUCER": '{"linger.ms": 20}',
            "REPLAY_KAFKA_CLUSTERS": '{"eu": {"bootstrap": "eu:9092", '
            '"sasl_username": "u", "sasl_password": "p"}}',
        }
    )
    catalog = load_catalog(_catalog(tmp_path))
    on_eu = build_spec(unsaved_day_run(cluster="eu"), catalog=catalog, settings=settings, result_uri=None)
    at_home = build_spec(unsaved_day_run(), catalog=catalog, settings=settings, result_uri=None)

    assert on_eu.kafka["bootstrap.servers"] == "eu:9092"
    assert (on_eu.kafka["sasl.username"], on_eu.kafka["sasl.password"], on_eu.kafka["linger.ms"]) == (
        "u",
        "p",
        20,
    )
    assert at_home.kafka["bootstrap.servers"] == "home:9092" and "sasl.username" not in at_home.kafka
    with pytest.raises(UnknownCluster, match="unknown Kafka cluster 'us'"):  # settings changed since
        build_spec(unsaved_day_run(cluster="us"), catalog=catalog, settings=settings, result_uri=None)


def test_a_source_may_send_transactionally_by_default_and_a_run_may_choose(tmp_path: Path) -> None:
    catalog = load_catalog(_catalog(tmp_path, "    delivery: transactional\n"))
    source = catalog.get("orders")
    replay = parse("orders 2024-01-01 tps=100")
    assert isinstance(replay, ReplayCommand)

    assert resolved_delivery(replay, source) == "transactional"
    assert resolved_delivery(replace(replay, delivery="idempotent"), source) == "idempotent"
    with pytest.raises(BadRequest, match="does not combine with on_error=dlq"):  # the source's default
        resolved_delivery(replace(replay, on_error="dlq"), source)


def test_a_replay_on_the_original_timeline_carries_its_speed_and_the_windows_start(tmp_path: Path) -> None:
    command = parse("orders 2024-01-01 tps=original speed=60x max=500")
    assert isinstance(command, ReplayCommand)
    assert ReplayBody.of(command).command(ReplayCommand) == command

    catalog = load_catalog(_catalog(tmp_path))
    run = unsaved_day_run(speed=60.0, shaped_s=1440.0)
    spec = build_spec(run, catalog=catalog, settings=load_settings({}), result_uri=None)

    assert spec.shape == Shape(speed=60.0, origin=datetime(2024, 1, 1, tzinfo=UTC).timestamp())
    assert spec_from_json(spec.to_json()).shape == spec.shape
    assert spec.tps == run.tps  # the ceiling


def test_a_run_without_a_ramp_has_no_ramp_section(tmp_path: Path) -> None:
    catalog = load_catalog(_catalog(tmp_path))
    spec = build_spec(unsaved_day_run(), catalog=catalog, settings=load_settings({}), result_uri=None)

    assert spec.ramp is None and "ramp" not in spec.to_dict()


@pytest.mark.parametrize(
    ("ramp", "tps", "field"),
    [
        ({"seconds": 0, "start": 0.1}, 1000, "ramp.seconds"),
        ({"seconds": 60, "start": 0}, 1000, "ramp.start"),
        ({"seconds": 60, "start": 1.5}, 1000, "ramp.start"),
        ({"seconds": 60}, 1000, "ramp.start"),
        ({"seconds": 60, "start": 0.1, "to": 2}, 1000, "ramp.to"),
        ({"seconds": 60, "start": 0.1}, 0, "ramp"),  # unthrottled: nothing to ramp
    ],
)
def test_a_bad_ramp_section_names_the_field(ramp: dict[str, Any], tps: int, field: str) -> None:
    with pytest.raises(SpecError) as raised:
        spec_from_dict(document(ramp=ramp, tps=tps))
    assert raised.value.field == field


@pytest.mark.parametrize(("ceiling", "tps"), [(0, 1000), (-5, 1000), (1_000, 0)])
def test_a_bad_byte_ceiling_names_the_field(ceiling: int, tps: int) -> None:
    with pytest.raises(SpecError) as raised:
        spec_from_dict(document(max_bytes_per_s=ceiling, tps=tps))
    assert raised.value.field == "max_bytes_per_s"


def test_an_api_ramp_out_of_bounds_is_refused_like_the_command() -> None:
    with pytest.raises(GrammarError, match=r"ramp"):
        ReplayBody(source="orders", window="last=1h", ramp_s=0).command(ReplayCommand)


def test_a_filter_goes_from_the_command_to_the_api_to_the_jobs_spec_and_its_header(tmp_path: Path) -> None:
    command = parse("orders 2024-01-01 tps=100 where=status in ('paid', 'shipped') and amount >= 10.5")
    assert isinstance(command, ReplayCommand)
    assert ReplayBody.of(command).command(ReplayCommand) == command
    assert ReplayBody.of(command).where == "status IN ('paid', 'shipped') AND amount >= 10.5"

    catalog = load_catalog(_catalog(tmp_path))
    run = unsaved_day_run(where="status IN ('paid', 'shipped') AND amount >= 10.5")
    spec = build_spec(run, catalog=catalog, settings=load_settings({}), result_uri=None)

    assert spec.where is not None and spec.where.columns() == ["status", "amount"]
    again = spec_from_json(spec.to_json())
    assert again.where == spec.where
    fingerprint = provenance_headers(spec)["replay-filter"]
    assert fingerprint == provenance_headers(again)["replay-filter"]
    other = build_spec(
        unsaved_day_run(where="status IN ('paid') AND amount >= 10.5"),
        catalog=catalog,
        settings=load_settings({}),
        result_uri=None,
    )
    assert provenance_headers(other)["replay-filter"] != fingerprint
    plain = build_spec(unsaved_day_run(), catalog=catalog, settings=load_settings({}), result_uri=None)
    assert "where" not in plain.to_dict() and "replay-filter" not in provenance_headers(plain)


def test_an_api_filter_is_read_by_the_grammar_and_refused_naming_its_token() -> None:
    with pytest.raises(GrammarError) as refused:
        ReplayBody(source="orders", window="last=1h", where="amount > abc").command(ReplayCommand)
    assert refused.value.token == "abc"


def test_a_sources_erasure_list_reaches_every_runs_spec_pinned_to_the_planned_version(tmp_path: Path) -> None:
    extra = "    erasures: {path: lists/erased.csv, format: csv, column: customer_id, key: customer}\n"
    catalog = load_catalog(_catalog(tmp_path, extra))
    listed = catalog.get("orders").erasures
    assert listed is not None and listed.path == str((tmp_path / "lists" / "erased.csv").resolve())

    pinned = build_spec(
        unsaved_day_run(erasures=listed.path, erasures_as_of="2024-05-02T09:30:00+00:00"),
        catalog=catalog,
        settings=load_settings({}),
        result_uri=None,
    )
    unpinned = build_spec(unsaved_day_run(), catalog=catalog, settings=load_settings({}), result_uri=None)

    assert pinned.erasures is not None and pinned.erasures.as_of == datetime(2024, 5, 2, 9, 30, tzinfo=UTC)
    assert (pinned.erasures.column, pinned.erasures.key, pinned.erasures.erased_at) == (
        "customer_id",
        "customer",
        "erased_at",
    )
    assert spec_from_json(pinned.to_json()).erasures == pinned.erasures
    assert unpinned.erasures is not None and unpinned.erasures.as_of is None  # the job pins what it finds
    assert spec_from_json(unpinned.to_json()).erasures == unpinned.erasures


def test_a_redrive_spec_takes_a_window_never_a_pipelines_slot() -> None:
    redrive = {"of": "r-1", "dlq_topic": "replay.dlq.orders", "runs": ["r-1"]}
    assert spec_from_dict(document(redrive=redrive)).redrive is not None
    with pytest.raises(SpecError) as raised:
        spec_from_dict(document(redrive=redrive, window=None, watermark={"column": "updated_at"}))
    assert raised.value.field == "redrive"


def test_a_pipelines_runs_send_as_their_source_does(tmp_path: Path) -> None:
    """A pipeline has no delivery= of its own: each slot takes the source's at the time."""
    transactional = load_catalog(_catalog(tmp_path, "    delivery: transactional\n")).get("orders")
    plain = load_catalog(_catalog(tmp_path)).get("orders")
    pipeline = Pipeline(source="orders", options=PipelineOptions())

    assert slot_options(pipeline, transactional).delivery == "transactional"
    assert slot_options(pipeline, plain).delivery == "idempotent"


def test_a_pipelines_runs_stay_on_the_cluster_it_was_made_on(tmp_path: Path) -> None:
    """Its topic is where it was made: each slot goes there whatever the source says now."""
    moved = load_catalog(_catalog(tmp_path, "    cluster: us\n")).get("orders")
    pipeline = Pipeline(source="orders", options=PipelineOptions(cluster="eu"))

    assert slot_options(pipeline, moved).cluster == "eu"
    assert slot_options(Pipeline(source="orders", options=PipelineOptions()), moved).cluster == "default"
