"""The lake runtimes of the default EMR release load and work on the suite's Spark.

`scripts/lake-jars` fetches the Iceberg and Delta jars the release table names; here they are held to
that table (by the versions the jars declare of themselves) and to the local launcher, which passes
them to every job with `--jars`. The session's lake copies (`scripts/devtools/lake_tables.py`) are
written by a real `spark-submit` with them: day partitions, several commits, a delete, an overwrite,
and reads pinned to the first commit that see none of what came after. A job pinned to a snapshot
the table no longer has fails with a reason that says so and what to do. An event-time window of
either format, pinned to its first commit, is replayed exactly and in entity order.
"""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from pyiceberg.table import StaticTable

from daemon.adapters.iceberg_table_stats import current_metadata
from daemon.adapters.local_launcher import LocalSparkLauncher
from daemon.core.spark_releases import DEFAULT_RELEASE, RELEASES
from scripts.lake_jars import jar_name
from tests.fixtures.kafka import (
    consume_all,
    create_topic,
    headers_of,
    key_of,
    topic_record_count,
    unique_topic,
    value_of,
)
from tests.fixtures.spark import SAMPLE_ROWS_PER_DAY, LakeCopy, job_spec, spark_submit, write_spec

RELEASE = RELEASES[DEFAULT_RELEASE]


def _declared_version(jar: Path) -> str:
    """The version a jar declares of itself: Iceberg's build properties, else the manifest's."""
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
        if "iceberg-build.properties" in names:
            text, key, separator = archive.read("iceberg-build.properties").decode(), "git.build.version", "="
        else:
            text, key, separator = (
                archive.read("META-INF/MANIFEST.MF").decode(),
                "Implementation-Version",
                ": ",
            )
    fields = dict(line.split(separator, 1) for line in text.splitlines() if separator in line)
    return fields[key].strip()


def test_the_fetched_jars_are_the_releases_artifacts(lake_jars: list[Path]) -> None:
    assert [jar.name for jar in lake_jars] == [jar_name(artifact) for artifact in RELEASE.lake_artifacts()]
    iceberg, delta_spark, delta_storage = lake_jars
    assert _declared_version(iceberg) == RELEASE.iceberg
    assert {_declared_version(delta_spark), _declared_version(delta_storage)} == {RELEASE.delta}


def test_the_local_launcher_gives_every_job_the_jars(lake_jars: list[Path], tmp_path: Path) -> None:
    launcher = LocalSparkLauncher(runs_dir=tmp_path / "runs", jars=tuple(lake_jars))

    command = launcher.submit_command("r-lake", tmp_path / "spec.json", workers=2)

    assert command[command.index("--jars") + 1] == ",".join(map(str, lake_jars))
    assert "--jars" not in LocalSparkLauncher(runs_dir=tmp_path / "bare").submit_command(
        "r-bare", tmp_path / "spec.json", workers=2
    )


@pytest.mark.spark
@pytest.mark.parametrize("table_format", ["iceberg", "delta"])
def test_spark_wrote_and_read_both_formats_with_them(
    lake_copies: dict[str, LakeCopy], table_format: str
) -> None:
    copy = lake_copies[table_format]

    assert copy.spark == RELEASE.spark
    assert copy.first_days == dict.fromkeys(
        ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"], SAMPLE_ROWS_PER_DAY
    )
    assert len(copy.days) == 7 and copy.first_snapshot != copy.snapshot
    deleted, overwritten = copy.days["2024-01-02"], copy.days["2024-01-03"]
    assert 0 < deleted < SAMPLE_ROWS_PER_DAY and overwritten == SAMPLE_ROWS_PER_DAY * 9 // 10


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.parametrize("table_format", ["iceberg", "delta"])
def test_a_job_pinned_to_a_snapshot_the_table_no_longer_has_says_so_and_sends_nothing(
    lake_copies: dict[str, LakeCopy],
    lake_jars: list[Path],
    kafka_bootstrap: str,
    tmp_path: Path,
    table_format: str,
) -> None:
    copy, topic = lake_copies[table_format], unique_topic(f"replay-gone-{table_format}")
    create_topic(kafka_bootstrap, topic)
    source = {"name": "orders", "path": str(copy.path), "format": table_format, "snapshot": "1234567"}
    document = job_spec(copy.path, kafka_bootstrap, topic, source=source)

    run = spark_submit(write_spec(tmp_path, document), jars=lake_jars)

    assert (run.kind, run.returncode) == ("REPLAY_FAILED", 1), run.stderr[-3000:]
    reason = run.document["reason"]
    assert f"the {table_format} table of source orders no longer has snapshot 1234567" in reason
    assert reason.endswith("replay the window again to plan on the table's current snapshot"), reason
    assert (run.document["confirmed"], topic_record_count(kafka_bootstrap, topic)) == (0, 0)


def test_a_job_whose_recorded_metadata_file_is_gone_says_so_and_sends_nothing(
    lake_copies: dict[str, LakeCopy], lake_jars: list[Path], kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A table named in a catalog is read from the metadata file its plan recorded; the table's
    maintenance may delete that file before a later reconcile reads it."""
    copy, topic = lake_copies["iceberg"], unique_topic("replay-meta-gone")
    create_topic(kafka_bootstrap, topic)
    gone = str(copy.path / "metadata" / "00009-removed-by-maintenance.metadata.json")
    source = {"name": "orders", "path": gone, "format": "iceberg", "snapshot": copy.snapshot}
    document = job_spec(copy.path, kafka_bootstrap, topic, source=source)

    run = spark_submit(write_spec(tmp_path, document), jars=lake_jars)

    assert (run.kind, run.returncode) == ("REPLAY_FAILED", 1), run.stderr[-3000:]
    reason = run.document["reason"]
    assert f"no longer has the metadata file this run was planned on ({gone}" in reason, reason
    assert reason.endswith("replay the window again to plan on the table's current snapshot"), reason
    assert (run.document["confirmed"], topic_record_count(kafka_bootstrap, topic)) == (0, 0)


def _rows_at(copy: LakeCopy, snapshot: str) -> pa.Table:
    """The table's rows at one snapshot or version, read with pyiceberg or deltalake."""
    if copy.format == "delta":
        return DeltaTable(str(copy.path), version=int(snapshot)).to_pyarrow_dataset().to_table()
    table = StaticTable.from_metadata(current_metadata(str(copy.path)))
    return table.scan(snapshot_id=int(snapshot)).to_arrow()


@pytest.mark.parametrize("table_format", ["iceberg", "delta"])
def test_a_time_window_of_a_lake_table_is_replayed_exactly_and_in_entity_order(
    lake_copies: dict[str, LakeCopy],
    lake_jars: list[Path],
    kafka_bootstrap: str,
    tmp_path: Path,
    table_format: str,
) -> None:
    """A half-open event-time window across two days, at the snapshot the run pins, ordering=entity:
    every id the snapshot holds in the range and no other, each key on one partition in event order."""
    copy, topic = lake_copies[table_format], unique_topic(f"replay-lake-time-{table_format}")
    create_topic(kafka_bootstrap, topic, partitions=3)
    start, end = datetime(2024, 1, 2, 6, tzinfo=UTC), datetime(2024, 1, 3, 18, tzinfo=UTC)
    window = {"column": "updated_at", "start": start.isoformat(), "end": end.isoformat()}
    source = {
        "name": "orders",
        "path": str(copy.path),
        "format": table_format,
        "snapshot": copy.first_snapshot,
    }
    document = job_spec(copy.path, kafka_bootstrap, topic, source=source, window=window)

    run = spark_submit(write_spec(tmp_path, document), jars=lake_jars)

    assert (run.kind, run.returncode) == ("REPLAY_RESULT", 0), run.stderr[-3000:]
    rows = _rows_at(copy, copy.first_snapshot)
    times = pc.cast(rows.column("updated_at"), pa.timestamp("us", tz="UTC"))
    kept = rows.filter(pc.and_(pc.greater_equal(times, start), pc.less(times, end)))
    expected = set(kept.column("event_id").to_pylist())
    assert len(expected) < rows.num_rows, "the window must leave rows out to test it"
    messages = consume_all(kafka_bootstrap, topic, expected=len(expected))
    ids = [headers_of(m)["replay-event-id"].decode() for m in messages]
    assert sorted(ids) == sorted(expected)
    assert run.document["confirmed"] == len(expected)
    seen: dict[bytes, tuple[int | None, str]] = {}
    for message in messages:  # per-partition order: each key's events in event time
        key, at = key_of(message), json.loads(value_of(message))["updated_at"]
        partition, last = seen.get(key, (message.partition(), ""))
        assert partition == message.partition(), f"key {key!r} on two partitions"
        assert at >= last, f"key {key!r}: {at} after {last}"
        seen[key] = (partition, at)
    assert max(Counter(key_of(m) for m in messages).values()) > 1, "no key with two events: order untested"
