#!/usr/bin/env python3
"""An Iceberg REST catalog on loopback (Iceberg's own servlet over a SQLite JDBC catalog), for tests.

    python scripts/iceberg_rest.py [--state-dir DIR]    # runs until Ctrl-C

Iceberg serves the REST protocol in its test fixture, from `RESTCatalogServlet` and
`RESTCatalogAdapter` in iceberg-core's test jar. The fixture's own runnable jar
(iceberg-open-api's test fixtures) is not served here, so scripts/iceberg-rest/LoopbackRestCatalog.java
serves the two classes itself with Jetty. scripts/iceberg-rest/pom.xml resolves the jars into
~/.cache/kafka-replay/ once with Maven; the launcher is compiled once. Run as a script, this prints
``uri=http://127.0.0.1:PORT`` once the catalog answers.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPTS_DIR = Path(__file__).resolve().parent
if str(SCRIPTS_DIR.parent) not in sys.path:  # run by path: `scripts.…` imports resolve from the repo
    sys.path.insert(0, str(SCRIPTS_DIR.parent))

from scripts.java_service import HOST, Service, ServiceError, compiled, free_port, launch, serve  # noqa: E402
from scripts.spark_kafka_jars import cache_root, file_lock  # noqa: E402

POM = SCRIPTS_DIR / "iceberg-rest" / "pom.xml"
SOURCE = SCRIPTS_DIR / "iceberg-rest" / "LoopbackRestCatalog.java"
MAVEN_TIMEOUT_S = 900.0


def ensure_jars() -> Path:
    """The server's jars, resolved from the POM once (a new POM resolves again)."""
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    dest = cache_root() / f"iceberg-rest-{digest}"
    with file_lock(cache_root() / "iceberg-rest.lock"):
        if (dest / "manifest.json").exists():
            return dest / "libs"
        mvn = shutil.which("mvn")
        if mvn is None:
            raise ServiceError(
                "Maven (mvn) is not on PATH; it is needed once to fetch the REST catalog's jars"
            )
        staging = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        command = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(POM),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging / 'libs'}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S, check=False)
        if done.returncode != 0:
            output = (done.stdout + done.stderr).strip().splitlines()
            raise ServiceError("Maven could not resolve the REST catalog's jars:\n" + "\n".join(output[-40:]))
        jars = sorted(path.name for path in (staging / "libs").glob("*.jar"))
        (staging / "manifest.json").write_text(json.dumps({"jars": jars}, indent=2) + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        staging.rename(dest)
    return dest / "libs"


def start(state_dir: Path) -> Service:
    """A REST catalog whose database and warehouse live under ``state_dir``; returns once it answers."""
    jars = f"{ensure_jars()}/*"
    launcher = compiled(SOURCE, jars, POM.read_text())
    port = free_port()
    (state_dir / "warehouse").mkdir(parents=True, exist_ok=True)
    return launch(
        SOURCE.stem,
        [str(launcher), jars],
        port=port,
        uri=f"http://{HOST}:{port}",
        log=state_dir / "rest-catalog.log",
        args=[str(port), str(state_dir / "warehouse"), str(state_dir / "catalog.db")],
    )


def main(argv: list[str] | None = None) -> int:
    return serve(start, __doc__.splitlines()[0], SCRIPTS_DIR.parent / ".state" / "iceberg-rest", argv)


if __name__ == "__main__":
    sys.exit(main())
