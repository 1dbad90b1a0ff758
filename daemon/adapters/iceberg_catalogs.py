"""`IcebergCatalogs`: a named Iceberg table's current metadata file, asked of the catalog it is in.

The daemon is the only process that talks to a catalog. It asks for the metadata file the catalog
points the table at now (every snapshot the table still has is in it); plans count from that file and
the run records it, so the job reads the file directly, with no catalog client, driver or credential
of its own (docs/decisions/0037). ``sql``, ``rest`` and ``glue`` catalogs are `pyiceberg`'s own
clients; a ``hadoop`` catalog is a folder, its table at ``<warehouse>/<namespace>/<table>`` with the
current version in ``metadata/version-hint.text``.
"""

from __future__ import annotations

from collections.abc import Mapping
from threading import Lock

from pyiceberg.catalog import Catalog as PyIcebergCatalog
from pyiceberg.catalog.glue import GlueCatalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from daemon.adapters.iceberg_table_stats import current_metadata
from daemon.config.lake_catalogs import LakeCatalog
from daemon.core.errors import BadRequest, ConfigError, DependencyDown, ReplayError


class IcebergCatalogs:
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
        try:
            table = self._client(catalog_name, settings).load_table(identifier)
        except (NoSuchTableError, NoSuchNamespaceError):
            raise BadRequest(f"catalog '{catalog_name}' has no table {identifier}") from None
        except ReplayError:
            raise
        except Exception as exc:  # drivers, HTTP and AWS clients each raise their own: all mean "down"
            raise DependencyDown(
                "table_storage",
                catalog_name,
                f"cannot ask catalog '{catalog_name}' for {identifier}: {type(exc).__name__}: {exc}",
            ) from exc
        location: str = table.metadata_location
        return location

    def _client(self, name: str, settings: LakeCatalog) -> PyIcebergCatalog:
        """The catalog's client, made outside the lock: a slow catalog holds up only its own callers."""
        with self._lock:
            client = self._clients.get(name)
        if client is None:
            client = _new_client(settings.catalog_name or name, settings)
            with self._lock:
                client = self._clients.setdefault(name, client)
        return client


def _new_client(name: str, settings: LakeCatalog) -> PyIcebergCatalog:
    """The client of one type, made from these settings only (`pyiceberg.load_catalog` would also read
    `~/.pyiceberg.yaml` and `PYICEBERG_*` variables)."""
    properties = _properties(settings)
    if settings.type == "sql":
        return SqlCatalog(name, **properties)
    if settings.type == "rest":
        return RestCatalog(name, **properties)
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
    elif settings.type == "rest":
        assert settings.uri is not None
        properties["uri"] = settings.uri
        if secret is not None:
            properties["token"] = secret
    elif settings.type == "glue" and settings.region:
        properties["glue.region"] = settings.region
    return properties


def _hadoop_metadata(settings: LakeCatalog, name: str, identifier: str) -> str:
    assert settings.warehouse is not None  # LakeCatalog requires it
    root = f"{settings.warehouse.rstrip('/')}/{identifier.replace('.', '/')}"
    try:
        return current_metadata(root)  # a Hadoop catalog's table is a table at a path
    except BadRequest:
        raise BadRequest(f"the hadoop catalog has no table {name} (no Iceberg table at {root})") from None
