"""What reading a table format needs in the Spark session, for the job and for whoever starts it.

Static settings: they must be in place before the session starts. Delta's reader refuses to run
without its extension and catalog; Iceberg reads a path without either. A standby driver's session
is built before it knows its run's format (ADR 0049), so its launcher passes, with ``--conf``, the
settings of every format whose runtime it gives with ``--jars`` (``session_conf_for_jars``).
"""

from __future__ import annotations

from collections.abc import Iterable

FORMAT_CONF = {
    "delta": {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    },
}
FORMAT_JARS = {"delta": "delta-spark"}  # the runtime jar whose classes a format's settings name


def session_conf_for_jars(jar_names: Iterable[str]) -> dict[str, str]:
    """The session settings of every format whose runtime is among ``jar_names``."""
    names = list(jar_names)
    return {
        key: value
        for table_format, jar in FORMAT_JARS.items()
        if any(jar in name for name in names)
        for key, value in FORMAT_CONF[table_format].items()
    }
