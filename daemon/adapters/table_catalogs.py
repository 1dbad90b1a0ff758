"""`TableCatalogs`: where a named table is read, asked of the catalog it is in.

The daemon is the only process that talks to a catalog. For an Iceberg table it asks for the metadata
file the catalog points the table at now (every snapshot the table still has is in it); for a Delta
or Parquet table in a metastore (the AWS Glue Data Catalog, Spark's session catalog on EMR, or a Hive
metastore elsewhere), for the table's location. Plans count from there and the run records it, so
the job reads it directly, with no catalog client, driver or credential of its own
(docs/decisions/0037, 0038, 0040). ``sql``, ``rest``, ``glue`` and ``hive`` catalogs' Iceberg tables
are `pyiceberg`'s own clients; a Hive metastore's other tables are one Thrift ``get_table`` call; a
``hadoop`` catalog is a folder, its table at ``<warehouse>/<namespace>/<table>`` with the current
version in ``metadata/version-hint.text``.
"""

from __future__ import annotations

from collections.abc import Mapping
from threading import Lock
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from daemon.config.lake_catalogs import METASTORES, LakeCatalog
from daemon.core.errors import BadRequest, ConfigError, DependencyDown, ReplayError

if TYPE_CHECKING:  # pyiceberg is imported where an Iceberg catalog is first asked (LakeTableStats says why)
    from pyiceberg.catalog import Catalog as PyIcebergCatalog

HIVE_TIMEOUT_MS = 10_000  # connecting to and answering from a metastore: it is asked inside a plan


class TableCatalogs:
    """The daemon's configured catalogs, each client made on first use and kept."""

    def __init__(self, catalogs: Mapping[str, LakeCatalog]) -> None:
        """A sql catalog's uri that is no SQLAlchemy URL stops the daemon here, at start-up."""
        for name, settings in catalogs.items():
            if settings.type == "sql" and settings.uri is not None:
                try:
                    make_url(settings.uri)
                except ArgumentError as exc:
                    raise ConfigError(
                        f"REPLAY_LAKE_CATALOGS: catalog '{name}': its uri is not a SQLAlchemy URL ({exc})"
                    ) from None
        self._settings = dict(catalogs)
        self._clients: dict[str, PyIcebergCatalog] = {}
        self._glue_clients: dict[str, Any] = {}
        self._lock = Lock()

    def metadata_location(self, name: str) -> str:
        """The current metadata file of ``<catalog>.<namespace>.<table>``."""
        catalog_name, _, identifier = name.partition(".")
        settings = self._settings.get(catalog_name)
        if settings is None:
            raise BadRequest(
                f"the table {name} is in catalog '{catalog_name}', which this daemon does not have "
                "(REPLAY_LAKE_CATALOGS)"
            )
        if settings.type == "hadoop":
            return _hadoop_metadata(settings, name, identifier)
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        try:
            table = self._client(catalog_name, settings).load_table(identifier)
        except (NoSuchTableError, NoSuchNamespaceError):
            raise BadRequest(f"catalog '{catalog_name}' has no table {identifier}") from None
        except ReplayError:
            raise
        except Exception as exc:  # drivers, HTTP and AWS clients each raise their own: all mean "down"
            raise _down(catalog_name, identifier, exc) from exc
        location: str = table.metadata_location
        return location

    def location(self, name: str, table_format: str) -> str:
        """Where a Delta or Parquet table ``<catalog>.<database>.<table>`` of a metastore (a glue or
        hive catalog) lives, as the metastore says (Spark keeps a data source table's real location in
        its serde's ``path`` when ``Location`` is a placeholder). A table of another format is refused."""
        catalog_name, _, identifier = name.partition(".")
        settings = self._settings.get(catalog_name)
        if settings is None or settings.type not in METASTORES:
            raise BadRequest(
                f"the {table_format} table {name} is named in catalog '{catalog_name}', "
                "which is not a glue or hive catalog of this daemon (REPLAY_LAKE_CATALOGS)"
            )
        database, _, table_name = identifier.rpartition(".")
        if settings.type == "glue":
            table, says = self._glue_table(catalog_name, settings, database, table_name), "the Data Catalog"
        else:
            table, says = _hive_table(catalog_name, settings, database, table_name), "the Hive metastore"
        stored = stored_format(table)
        if stored != table_format:
            raise BadRequest(
                f"{says} says {name} is a {stored or 'table of no format it names'} table, "
                f"not {table_format}: set the source's table format to match"
            )
        where = stored_location(table)
        if where is None:
            raise BadRequest(f"{says} gives no location for {name}")
        return where

    def _glue_table(self, catalog_name: str, settings: LakeCatalog, database: str, table: str) -> Any:
        try:
            return self._glue(catalog_name, settings).get_table(DatabaseName=database, Name=table)["Table"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "EntityNotFoundException":
                raise BadRequest(f"catalog '{catalog_name}' has no table {database}.{table}") from None
            raise _down(catalog_name, f"{database}.{table}", exc) from exc
        except Exception as exc:  # connection, credentials, endpoint: the catalog cannot answer
            raise _down(catalog_name, f"{database}.{table}", exc) from exc

    def _glue(self, name: str, settings: LakeCatalog) -> Any:
        """The catalog's Glue client, made once (boto3's clients are safe to share between threads)."""
        with self._lock:
            client = self._glue_clients.get(name)
        if client is None:
            client = _glue(settings)
            with self._lock:
                client = self._glue_clients.setdefault(name, client)
        return client

    def _client(self, name: str, settings: LakeCatalog) -> PyIcebergCatalog:
        """The catalog's client, made outside the lock: a slow catalog holds up only its own callers."""
        with self._lock:
            client = self._clients.get(name)
        if client is None:
            client = _new_client(settings.catalog_name or name, settings)
            with self._lock:
                client = self._clients.setdefault(name, client)
        return client


def stored_format(table: Mapping[str, Any]) -> str | None:
    """A metastore table's format, as Spark, Iceberg and Glue's crawlers record it (in Glue's shape:
    the Data Catalog's records are Hive's)."""
    parameters = {key.lower(): str(value).lower() for key, value in (table.get("Parameters") or {}).items()}
    if parameters.get("table_type") == "iceberg":
        return "iceberg"
    for key in ("spark.sql.sources.provider", "classification", "table_type"):
        if parameters.get(key) in ("delta", "parquet"):
            return parameters[key]
    serde = str(((table.get("StorageDescriptor") or {}).get("SerdeInfo") or {}).get("SerializationLibrary"))
    return "parquet" if "parquet" in serde.lower() else None


def stored_location(table: Mapping[str, Any]) -> str | None:
    """A metastore table's location; a Spark data source table keeps it in its serde's ``path``. A
    local one (Spark writes ``file:/path``) is given as its path, which every reader takes."""
    storage = table.get("StorageDescriptor") or {}
    serde_path = ((storage.get("SerdeInfo") or {}).get("Parameters") or {}).get("path")
    location = storage.get("Location")
    found = location if location and "__PLACEHOLDER__" not in location else serde_path
    if not found:
        return None
    found = str(found)
    return "/" + found.removeprefix("file:").lstrip("/") if found.startswith("file:") else found


def _hive_table(catalog_name: str, settings: LakeCatalog, database: str, table: str) -> dict[str, Any]:
    """One ``get_table`` of a Hive metastore, in the Data Catalog's shape (its records are Hive's)."""
    # Thrift's generated client costs a daemon without a Hive catalog a tenth of a second or more.
    from hive_metastore.ThriftHiveMetastore import Client as HiveClient
    from hive_metastore.ttypes import NoSuchObjectException
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    assert settings.uri is not None  # LakeCatalog requires thrift://host:port
    host, _, port = settings.uri.removeprefix("thrift://").rpartition(":")
    socket = TSocket.TSocket(host, int(port))
    socket.setTimeout(HIVE_TIMEOUT_MS)
    transport = TTransport.TBufferedTransport(socket)
    try:
        transport.open()
        try:
            found = HiveClient(TBinaryProtocol.TBinaryProtocol(transport)).get_table(database, table)
        finally:
            transport.close()
    except NoSuchObjectException:
        raise BadRequest(f"catalog '{catalog_name}' has no table {database}.{table}") from None
    except Exception as exc:  # refused, timed out, a server error: the metastore cannot answer
        raise _down(catalog_name, f"{database}.{table}", exc) from exc
    storage = found.sd
    serde = storage.serdeInfo if storage is not None else None
    return {
        "Parameters": dict(found.parameters or {}),
        "StorageDescriptor": {
            "Location": storage.location if storage is not None else None,
            "SerdeInfo": {
                "SerializationLibrary": serde.serializationLib if serde is not None else None,
                "Parameters": dict(serde.parameters or {}) if serde is not None else {},
            },
        },
    }


def _glue(settings: LakeCatalog) -> Any:
    """A Glue client: credentials from the environment, as every AWS client of the daemon has them.
    boto3 is imported here, at the first Glue lookup: a daemon without a Glue catalog never pays for it."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "glue",
        region_name=settings.region,
        endpoint_url=settings.endpoint,
        config=Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=20),
    )


def _down(catalog_name: str, identifier: str, exc: Exception) -> DependencyDown:
    return DependencyDown(
        "table_storage",
        catalog_name,
        f"cannot ask catalog '{catalog_name}' for {identifier}: {type(exc).__name__}: {exc}",
    )


def _new_client(name: str, settings: LakeCatalog) -> PyIcebergCatalog:
    """The client of one type, made from these settings only (`pyiceberg.load_catalog` would also read
    `~/.pyiceberg.yaml` and `PYICEBERG_*` variables)."""
    properties = _properties(settings)
    if settings.type == "sql":
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog(name, **properties)
    if settings.type == "rest":
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(name, **properties)
    if settings.type == "hive":
        from pyiceberg.catalog.hive import HiveCatalog

        return HiveCatalog(name, **properties)
    from pyiceberg.catalog.glue import GlueCatalog

    return GlueCatalog(name, **properties)


def _properties(settings: LakeCatalog) -> dict[str, str]:
    """pyiceberg's properties for one catalog; the secret goes in here and nowhere else."""
    secret = None if settings.password is None else settings.password.get_secret_value()
    properties: dict[str, str] = {"type": settings.type}
    if settings.warehouse:
        properties["warehouse"] = settings.warehouse
    if settings.type == "sql":
        assert settings.uri is not None  # LakeCatalog requires it, as a SQLAlchemy URL
        url = make_url(settings.uri)
        if secret is not None:
            url = url.set(password=secret)
        properties["uri"] = url.render_as_string(hide_password=False)
        properties["init_catalog_tables"] = "false"  # read a catalog; never create one in the wrong place
    elif settings.type in ("rest", "hive"):
        assert settings.uri is not None
        properties["uri"] = settings.uri
        if secret is not None:
            properties["token"] = secret
    elif settings.type == "glue":
        if settings.region:
            properties["glue.region"] = settings.region
        if settings.endpoint:
            properties["glue.endpoint"] = settings.endpoint
    return properties


def _hadoop_metadata(settings: LakeCatalog, name: str, identifier: str) -> str:
    from daemon.adapters.iceberg_table_stats import current_metadata

    assert settings.warehouse is not None  # LakeCatalog requires it
    root = f"{settings.warehouse.rstrip('/')}/{identifier.replace('.', '/')}"
    try:
        return current_metadata(root)  # a Hadoop catalog's table is a table at a path
    except BadRequest:
        raise BadRequest(f"the hadoop catalog has no table {name} (no Iceberg table at {root})") from None
