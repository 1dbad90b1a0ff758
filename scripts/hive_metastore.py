#!/usr/bin/env python3
"""A Hive metastore on loopback, built from the jars pyspark ships, for tests and local trials.

    python scripts/hive_metastore.py [--state-dir DIR]    # runs until Ctrl-C

It is what a team's Spark session catalog is outside AWS: a Thrift service on a database (here
Derby, embedded, under the state directory). Spark jobs reach it with
``spark.hadoop.hive.metastore.uris``, the daemon with a ``hive`` catalog in REPLAY_LAKE_CATALOGS.
The launcher (scripts/hive/LoopbackMetastore.java) is compiled once against pyspark's jars; run as
a script, this prints ``uri=thrift://127.0.0.1:PORT`` once the metastore answers.
"""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS_DIR = Path(__file__).resolve().parent
if str(SCRIPTS_DIR.parent) not in sys.path:  # run by path: `scripts.…` imports resolve from the repo
    sys.path.insert(0, str(SCRIPTS_DIR.parent))

from scripts.java_service import HOST, Service, compiled, free_port, launch, serve  # noqa: E402

SOURCE = SCRIPTS_DIR / "hive" / "LoopbackMetastore.java"


def spark_jars() -> Path:
    """pyspark's jar folder: the Hive 2.3 metastore, DataNucleus, Derby and Thrift are all in it."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def start(state_dir: Path) -> Service:
    """A metastore whose database and warehouse live under ``state_dir``; returns once it answers."""
    import pyspark

    jars = f"{spark_jars()}/*"
    launcher = compiled(SOURCE, jars, f"pyspark-{pyspark.__version__}")
    port = free_port()
    database = state_dir / "metastore_db"
    properties = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={database};create=true",
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "datanucleus.connectionPoolingType": "HikariCP",  # Hive's default, BoneCP, is not in pyspark
        "hive.metastore.warehouse.dir": str(state_dir / "warehouse"),
        "derby.stream.error.file": str(state_dir / "derby.log"),
        # Hive's own log4j2 file asks for async loggers, whose library pyspark does not ship
        "log4j2.contextSelector": "org.apache.logging.log4j.core.selector.ClassLoaderContextSelector",
    }
    return launch(
        SOURCE.stem,
        [str(launcher), jars],
        port=port,
        uri=f"thrift://{HOST}:{port}",
        log=state_dir / "metastore.log",
        args=[str(port)],
        properties=properties,
    )


def main(argv: list[str] | None = None) -> int:
    return serve(start, __doc__.splitlines()[0], SCRIPTS_DIR.parent / ".state" / "hive", argv)


if __name__ == "__main__":
    sys.exit(main())
