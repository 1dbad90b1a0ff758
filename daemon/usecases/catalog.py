"""The sources catalog: which lake tables may be replayed, how, to where, and by whom.

Users only ever type a source name; everything about the table lives here. A bad catalog stops the
daemon at start-up with one line naming the file, the source and the field. A running daemon reads
its file again on `Catalog.reload` (SIGHUP): every use case holds the same `Catalog`, so all of them
see the new sources at once, and a bad file is refused with the old sources still in use.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from daemon.core.clusters import DEFAULT_CLUSTER, check_cluster_name, unknown_cluster
from daemon.core.errors import BadRequest, CatalogError, UnknownSource
from daemon.core.grammar import TRANSACTIONAL_DLQ, Delivery, OnError, Timestamp
from daemon.usecases.value_formats import (
    RawColumns,
    ValueFormat,
    check_raw,
    check_value_columns,
    check_value_format,
    with_raw_defaults,
)
from spark_job.spec.model import DEFAULT_PARTITIONER, SPARK_MEMORY, Partitioner

_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_SLACK_USER = re.compile(r"^[UW][A-Z0-9]{2,}$")
_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){1,}$")


TableFormat = Literal["parquet", "iceberg", "delta"]
TABLE_FORMATS: tuple[TableFormat, ...] = ("parquet", "iceberg", "delta")


class TableRef(BaseModel):
    """Where the table lives and how it is stored: hive-partitioned Parquet files, an Apache Iceberg
    table or a Delta Lake table at a path (local or s3://), or a table by its name in one of the
    daemon's catalogs (``<catalog>.<namespace>.<table>``, `REPLAY_LAKE_CATALOGS`): an Iceberg table in
    any, a Delta or Parquet table in a Glue Data Catalog or a Hive metastore. A two-part name
    (``<database>.<table>``, as Spark SQL names it) is a table of Spark's session catalog: loading
    the sources makes it ``<session catalog>.<database>.<table>``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str | None = None
    table: str | None = None
    format: TableFormat = "parquet"

    @model_validator(mode="after")
    def _one_location(self) -> TableRef:
        if (self.path is None) == (self.table is None):
            raise ValueError("give exactly one of 'path' or 'table'")
        if self.table is not None and not _TABLE_NAME.match(self.table):  # refused before any plan
            raise ValueError(
                f"'{self.table}' is not '<catalog>.<namespace>.<table>' or, in Spark's session catalog, "
                "'<database>.<table>' (letters, digits and '_')"
            )
        return self

    @property
    def in_session_catalog(self) -> bool:
        """A two-part name: a table of Spark's session catalog, not yet given that catalog's name."""
        return self.table is not None and self.table.count(".") == 1

    def in_catalog(self, name: str) -> TableRef:
        """This two-part name as a table of catalog ``name``."""
        return TableRef(table=f"{name}.{self.table}", format=self.format)

    @property
    def catalog(self) -> str | None:
        """The catalog a named table is in; None for a table at a path."""
        return None if self.table is None else self.table.split(".", 1)[0]

    @property
    def identifier(self) -> str | None:
        """A named table's ``<namespace>.<table>`` within its catalog; None for a table at a path."""
        return None if self.table is None else self.table.split(".", 1)[1]

    @property
    def location(self) -> str:
        """What messages call the table: its path, or its name in its catalog."""
        return self.path if self.path is not None else f"{self.table}"

    def read_at(self, where: str | None) -> TableRef:
        """The table at the place its catalog gave (``TableStats.metadata_file``), so every later read
        of one plan sees that one answer; itself when it has no catalog (``where`` None)."""
        return self if where is None else TableRef(path=where, format=self.format)


class EncryptedColumn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key_ref: str = Field(min_length=1, description="KMS key id/ARN, or local:<name> for a local key file")


class ErasureList(BaseModel):
    """Keys of people who asked to be forgotten, each with the time of erasure: a Parquet table (a
    file or a directory of files) or a CSV file with a header. Every run of the source leaves their
    events out; no option turns that off."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1, description="where the list is: a local path or s3:// URI")
    format: Literal["parquet", "csv"] = "parquet"
    column: str | None = Field(
        default=None, description="the source's column the keys name; None: key_column"
    )
    key: str = Field(default="key", min_length=1, description="the list's column of erased keys")
    erased_at: str = Field(default="erased_at", min_length=1, description="the list's time of erasure")


class ExecutorSize(BaseModel):
    """A source's executors on a Spark cluster (`REPLAY_LAUNCHER=spark`), over the settings
    `REPLAY_SPARK_EXECUTOR_CORES` and `REPLAY_SPARK_EXECUTOR_MEMORY`: more memory for wide rows,
    more cores for more slots each. Local jobs have no executors, and EMR Serverless sizes its
    applications from its own settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cores: int | None = Field(default=None, ge=1, le=64, description="cores of each executor")
    memory: str | None = Field(
        default=None, pattern=SPARK_MEMORY.pattern, description="heap of each executor, as Spark writes it"
    )


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    table: TableRef
    partition_column: str = Field(min_length=1)
    event_time_column: str = Field(min_length=1)
    key_column: str = Field(min_length=1)
    event_id_column: str = Field(min_length=1)
    watermark_column: str | None = None
    type_column: str | None = None  # the event's type (payment.captured): what `types=` selects by
    encrypted_columns: dict[str, EncryptedColumn] = Field(default_factory=dict)
    erasures: ErasureList | None = None  # erased entities: every run leaves their events out
    # json: value_columns as JSON (default all but partition_column); raw: a bronze table's bytes
    value_format: ValueFormat = "json"
    value_columns: list[str] | None = Field(default=None, min_length=1)
    raw: RawColumns | None = None  # a raw source's value, headers and timestamp columns
    live_topic: str | None = None
    # the Kafka cluster its topics live on: its live topic, and its runs' topics, dead letters,
    # progress and control (one of the daemon's REPLAY_KAFKA_CLUSTERS, or the default one)
    cluster: str = DEFAULT_CLUSTER
    retention: str | None = None  # how far back the table's history goes, in words (shown by `sources`)
    owners: list[str] = Field(min_length=1)
    # 2: a replay into the live topic also needs the click of a second owner (not the requester).
    live_approvals: int = Field(default=1, ge=1, le=2)
    # librdkafka's name for how keys map to partitions; murmur2 = the Java client's (the default)
    partitioner: Partitioner = DEFAULT_PARTITIONER
    timestamp: Timestamp = "replay"  # the runs' default: records stamped at publish, or at event time
    on_error: OnError = "fail"  # the runs' default: a bad record fails the run, or goes to its dlq topic
    # the runs' default: idempotent, or in Kafka transactions (recommended for a live topic, ADR 0057)
    delivery: Delivery = "idempotent"
    executor: ExecutorSize | None = None  # its executors' size on a Spark cluster; None: the settings'

    @model_validator(mode="before")
    @classmethod
    def _raw_defaults(cls, body: Any) -> Any:
        return with_raw_defaults(body)

    @field_validator("delivery")
    @classmethod
    def _delivery_fits(cls, value: Delivery, info: ValidationInfo) -> Delivery:
        if value == "transactional" and info.data.get("on_error") == "dlq":
            raise ValueError(TRANSACTIONAL_DLQ)
        return value

    @field_validator("value_format")
    @classmethod
    def _format_fits(cls, value: ValueFormat, info: ValidationInfo) -> ValueFormat:
        return check_value_format(value, info.data)

    @field_validator("value_columns")
    @classmethod
    def _json_columns(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        return check_value_columns(value, info.data)

    @field_validator("raw")
    @classmethod
    def _raw_columns(cls, value: RawColumns | None, info: ValidationInfo) -> RawColumns | None:
        return check_raw(value, info.data)

    @field_validator("cluster")
    @classmethod
    def _cluster_name(cls, value: str) -> str:
        return check_cluster_name(value)

    @field_validator("live_topic")
    @classmethod
    def _topic_name(cls, value: str | None) -> str | None:
        if value is not None and not _TOPIC.match(value):
            raise ValueError(f"'{value}' is not a valid Kafka topic name")
        return value

    @field_validator("owners")
    @classmethod
    def _slack_ids(cls, value: list[str]) -> list[str]:
        for owner in value:
            if not _SLACK_USER.match(owner):
                raise ValueError(f"'{owner}' is not a Slack user id (like U024BE7LH)")
        return value

    def named_columns(self) -> list[tuple[str, str]]:
        """Every table column this entry names, with the catalog field that names it."""
        named = [
            ("partition_column", self.partition_column),
            ("event_time_column", self.event_time_column),
            ("key_column", self.key_column),
            ("event_id_column", self.event_id_column),
            ("watermark_column", self.watermark_column),
            ("type_column", self.type_column),
            *(("value_columns", column) for column in self.value_columns or ()),
            *(("encrypted_columns", column) for column in self.encrypted_columns),
        ]
        if self.raw is not None:
            named += [
                ("raw.value_column", self.raw.value_column),
                ("raw.headers_column", self.raw.headers_column),
                ("raw.timestamp_column", self.raw.timestamp_column),
            ]
        return [(field, column) for field, column in named if column is not None]

    def check_columns(self, table_columns: Collection[str], *, catalog_path: str) -> None:
        """Refuse, naming the catalog file, the source and the field, a column its table lacks."""
        missing = [(field, column) for field, column in self.named_columns() if column not in table_columns]
        if missing:
            named = "; ".join(f"{field} '{column}'" for field, column in missing)
            raise BadRequest(
                f"{catalog_path}: source '{self.name}' names columns its table does not have: {named} "
                f"(the table has: {', '.join(sorted(table_columns))})"
            )

    @model_validator(mode="after")
    def _enough_owners_to_approve(self) -> Source:
        if len(set(self.owners)) < self.live_approvals:
            raise ValueError(f"live_approvals: {self.live_approvals} needs as many distinct owners")
        return self


@dataclass(frozen=True)
class CatalogChange:
    """What a reload changed, by source name; nothing in all three when the file is as it was."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.added or self.removed or self.changed)


class Catalog:
    """The sources in use. One instance is shared by every use case; `reload` swaps its sources in one
    assignment, so a reader sees either the old catalog or the new one, never a mix."""

    def __init__(
        self,
        *,
        path: str,
        sources: Mapping[str, Source],
        lake_catalogs: Mapping[str, str] | None = None,
        session_catalog: str | None = None,
        kafka_clusters: Collection[str] | None = None,
    ) -> None:
        self._lock = threading.Lock()  # one reload at a time; readers need none
        self._lake_catalogs = None if lake_catalogs is None else MappingProxyType(dict(lake_catalogs))
        self._session_catalog = session_catalog
        self._kafka_clusters = None if kafka_clusters is None else tuple(kafka_clusters)
        self._state: tuple[str, Mapping[str, Source]] = (path, MappingProxyType(dict(sources)))

    @property
    def path(self) -> str:
        return self._state[0]

    @property
    def sources(self) -> Mapping[str, Source]:
        return self._state[1]

    @contextlib.contextmanager
    def blaming_table(self, source: Source) -> Iterator[None]:
        """A refusal of the source's table (missing, or not a table of its format) names the catalog
        file, the source and its `table` entry."""
        try:
            yield
        except BadRequest as exc:
            raise BadRequest(f"{self.path}: source '{source.name}', its table: {exc}") from exc

    def get(self, name: str) -> Source:
        try:
            return self.sources[name]
        except KeyError:
            raise UnknownSource(name, list(self.sources)) from None

    def owners_of(self, source: str) -> tuple[str, ...]:
        """The source's owners as the catalog says now; none when it is no longer in the catalog.

        A pipeline is managed by its source's current owners (and the admins), not by the owners it
        was created with: a catalog change that removes someone removes their say over its pipelines.
        """
        found = self.sources.get(source)
        return tuple(found.owners) if found is not None else ()

    def names(self) -> list[str]:
        return sorted(self.sources)

    def reload(self) -> CatalogChange:
        """Read the file again and use it; a bad one raises `CatalogError` and the sources stay."""
        with self._lock:
            fresh = load_catalog(
                Path(self.path),
                lake_catalogs=self._lake_catalogs,
                session_catalog=self._session_catalog,
                kafka_clusters=self._kafka_clusters,
            )
            old = self.sources
            change = CatalogChange(
                added=tuple(sorted(set(fresh.sources) - set(old))),
                removed=tuple(sorted(set(old) - set(fresh.sources))),
                changed=tuple(sorted(n for n in set(old) & set(fresh.sources) if old[n] != fresh.sources[n])),
            )
            self._state = (self.path, fresh.sources)
            return change


def load_catalog(
    path: Path,
    *,
    lake_catalogs: Mapping[str, str] | None = None,
    session_catalog: str | None = None,
    kafka_clusters: Collection[str] | None = None,
) -> Catalog:
    """Read and validate the catalog; relative table paths resolve against the catalog's folder.

    ``lake_catalogs``: the daemon's catalogs (`REPLAY_LAKE_CATALOGS`), name to type; a table named in
    any other is refused here, and so is a Delta or Parquet table named in one that is not ``glue``
    or ``hive`` (only a metastore says where such a table lives). None: not checked (a catalog read without
    the settings). ``session_catalog``: the one of them a two-part name is in; with none, such a name
    is refused. ``kafka_clusters``: the daemon's Kafka cluster names; a source on any other is
    refused (None: not checked).
    """
    shown = str(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CatalogError(shown, None, None, "file not found") from None
    except yaml.YAMLError as exc:
        raise CatalogError(shown, None, None, f"not valid YAML: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("sources"), dict) or not raw["sources"]:
        raise CatalogError(shown, None, "sources", "expected a non-empty mapping of source name to source")
    unknown_top = set(raw) - {"sources"}
    if unknown_top:
        raise CatalogError(shown, None, sorted(unknown_top)[0], "unknown top-level key")

    sources: dict[str, Source] = {}
    for name, body in raw["sources"].items():
        source = _parse_source(shown, path.parent, str(name), body)
        if source.table.in_session_catalog and lake_catalogs is not None:
            if session_catalog is None:
                raise CatalogError(
                    shown,
                    str(name),
                    "table.table",
                    f"'{source.table.table}' is a table of Spark's session catalog, and no catalog of "
                    'REPLAY_LAKE_CATALOGS is marked "session": true '
                    "(or name it <catalog>.<database>.<table>)",
                )
            source = source.model_copy(update={"table": source.table.in_catalog(session_catalog)})
        named_in = source.table.catalog
        if named_in is not None and lake_catalogs is not None and named_in not in lake_catalogs:
            configured = ", ".join(sorted(lake_catalogs)) or "none"
            raise CatalogError(
                shown,
                str(name),
                "table.table",
                f"no catalog '{named_in}' in REPLAY_LAKE_CATALOGS (configured: {configured})",
            )
        kind = None if named_in is None or lake_catalogs is None else lake_catalogs[named_in]
        if kind is not None and source.table.format != "iceberg" and kind not in ("glue", "hive"):
            raise CatalogError(
                shown,
                str(name),
                "table.table",
                f"a {source.table.format} table by name is read from a glue or hive catalog (the "
                f"metastore says where it lives); '{named_in}' is a {kind} catalog: give the table's 'path'",
            )
        if kafka_clusters is not None and source.cluster not in kafka_clusters:
            raise CatalogError(shown, str(name), "cluster", unknown_cluster(source.cluster, kafka_clusters))
        sources[str(name)] = source
    return Catalog(
        path=shown,
        sources=sources,
        lake_catalogs=lake_catalogs,
        session_catalog=session_catalog,
        kafka_clusters=kafka_clusters,
    )


def _parse_source(shown: str, base: Path, name: str, body: object) -> Source:
    if not _NAME.match(name):
        raise CatalogError(shown, name, None, "source names are lower-case letters, digits, '-' and '_'")
    if not isinstance(body, dict):
        raise CatalogError(shown, name, None, "expected a mapping of fields")
    try:
        source = Source.model_validate({**body, "name": name})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        raise CatalogError(shown, name, field, first["msg"]) from None
    path = source.table.path
    if path is not None and "://" not in path and not Path(path).is_absolute():
        resolved = TableRef(path=str((base / path).resolve()), format=source.table.format)
        source = source.model_copy(update={"table": resolved})
    erasures = source.erasures
    if erasures is not None and "://" not in erasures.path and not Path(erasures.path).is_absolute():
        listed = erasures.model_copy(update={"path": str((base / erasures.path).resolve())})
        source = source.model_copy(update={"erasures": listed})
    return source
