"""The catalogs sources may name tables in, configured once for the daemon.

`REPLAY_LAKE_CATALOGS` is a JSON object of catalog name to its settings, for example
``{"lake": {"type": "sql", "uri": "postgresql+psycopg://lake@db/lake", "password": "…",
"warehouse": "s3://bucket/warehouse"}}``; a source then says ``table: {table: lake.sales.orders,
format: iceberg}``. A ``glue`` catalog (the AWS Glue Data Catalog, Spark's session catalog on EMR)
and a ``hive`` one (a Hive metastore, the session catalog elsewhere) also name Delta and Parquet
tables; the one marked ``"session": true`` is Spark's session catalog, whose tables sources name as
Spark SQL does, ``<database>.<table>``. Only the daemon talks to a catalog: it resolves the name to
the table's current metadata file (Iceberg) or location (Delta, Parquet) when it plans, and the job
reads that, so no catalog credential is ever written into a job spec (docs/decisions/0037, 0038,
0040, 0051).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

LakeCatalogType = Literal["sql", "rest", "glue", "hive", "hadoop"]
METASTORES = ("glue", "hive")  # the catalogs that also name Delta and Parquet tables

CATALOG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class LakeCatalog(BaseModel):
    """One catalog. ``sql`` is Iceberg's JDBC catalog schema (what Spark's `type=jdbc` writes) on a
    database SQLAlchemy reaches; ``rest`` a REST catalog; ``glue`` the AWS Glue Data Catalog (Spark's
    session catalog on EMR: it names Delta and Parquet tables too); ``hive`` a Hive metastore's Thrift
    service (Spark's session catalog outside AWS, also for Delta and Parquet); ``hadoop`` a
    warehouse folder where ``<namespace>/<table>`` is the table's path."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: LakeCatalogType
    uri: str | None = Field(
        default=None,
        description="sql: a SQLAlchemy URL without its password; rest: the service's URL; hive: the "
        "metastore's thrift://host:port",
    )
    password: SecretStr | None = Field(
        default=None, description="sql: the database password; rest: the bearer token"
    )
    warehouse: str | None = Field(default=None, description="the warehouse location (hadoop: required)")
    region: str | None = Field(default=None, description="glue: the AWS region of the Data Catalog")
    endpoint: str | None = Field(
        default=None, description="glue: an endpoint URL instead of AWS's own (a VPC endpoint)"
    )
    session: bool = Field(
        default=False,
        description="glue, hive: Spark's session catalog, so a source's two-part `table: "
        "<database>.<table>` is a table of this one (at most one catalog is)",
    )
    catalog_name: str | None = Field(
        default=None,
        description="sql: the name the catalog's rows are stored under (Spark's catalog name that "
        "wrote them, `spark.sql.catalog.<name>`); default: this catalog's key",
    )

    @model_validator(mode="after")
    def _what_each_type_needs(self) -> LakeCatalog:
        if self.type in ("sql", "rest", "hive") and not self.uri:
            raise ValueError(f"a {self.type} catalog needs 'uri'")
        if self.type == "hive" and not re.fullmatch(r"thrift://[^/:\s]+:\d{1,5}", self.uri or ""):
            raise ValueError("a hive catalog's 'uri' is thrift://<host>:<port> (its metastore's service)")
        if self.type == "hive" and self.password is not None:
            raise ValueError("a hive catalog takes no 'password' (the metastore's Thrift service has none)")
        if self.type == "hadoop" and not self.warehouse:
            raise ValueError("a hadoop catalog needs 'warehouse' (the folder its tables live under)")
        if self.session and self.type not in METASTORES:
            raise ValueError(
                "only a glue or hive catalog can be Spark's session catalog ('session'), "
                f"not a {self.type} one"
            )
        if self.endpoint is not None and self.type != "glue":
            raise ValueError(f"'endpoint' is for a glue catalog, not a {self.type} one")
        if self.uri is not None and re.search(r"://[^/@]*:[^/@]*@", self.uri):
            raise ValueError("put the password in 'password', not in 'uri' (a uri is shown in logs)")
        return self


def check_catalog_names(catalogs: dict[str, LakeCatalog]) -> dict[str, LakeCatalog]:
    """Names are the first part of a source's ``table``: letters, digits and '_' only, no dots. One
    catalog at most is the session catalog, or a two-part name would have two meanings."""
    for name in catalogs:
        if not CATALOG_NAME.match(name):
            raise ValueError(f"'{name}' is not a catalog name (letters, digits and '_', no dots)")
    sessions = sorted(name for name, catalog in catalogs.items() if catalog.session)
    if len(sessions) > 1:
        raise ValueError(
            f"only one catalog can be Spark's session catalog ('session'): {', '.join(sessions)}"
        )
    return catalogs


def session_catalog(catalogs: dict[str, LakeCatalog]) -> str | None:
    """The catalog a two-part table name is in, if one is marked ``session``."""
    return next((name for name, catalog in catalogs.items() if catalog.session), None)
