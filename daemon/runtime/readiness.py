"""`/readyz`: each dependency's state, probed concurrently, each probe bounded.

`/healthz` says the process is up; `/readyz` says whether it can do its work: Kafka answers, the
database answers, the table storage can be read, and — when configured — KMS (encrypted columns) and
EMR Serverless (the EMR launcher) answer. A dependency that is not configured is reported as such and
does not make the daemon unready. A probe that has not answered within `timeout_s` is down: the
answer never waits on the slowest dependency for longer than that.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text

from daemon.adapters.aws_errors import aws_errors
from daemon.adapters.kafka_topic_admin import KafkaTopicAdmin
from daemon.adapters.lake_table_stats import LakeTableStats
from daemon.adapters.table_catalogs import TableCatalogs
from daemon.config.settings import Settings
from daemon.usecases.catalog import Catalog, TableRef
from store import Store

PROBE_TIMEOUT_S = 2.0
_GRACE_S = 0.3  # a probe that times out itself says why; past this it is only "no answer"
OK = "ok"
NOT_CONFIGURED = "not configured"
DEPENDENCIES = ("kafka", "database", "table_storage", "kms", "emr")

Probe = Callable[[], None]  # returns when the dependency answered; raises with a message when not


@dataclass(frozen=True)
class Readiness:
    """The probes by dependency name; None: that dependency is not configured on this daemon."""

    probes: Mapping[str, Probe | None]
    timeout_s: float = PROBE_TIMEOUT_S

    def check(self) -> dict[str, str]:
        """`ok`, `not configured`, or `down: <why>` for each dependency, all probed at once."""
        answers: dict[str, str] = {}
        lock = threading.Lock()

        def run(name: str, probe: Probe) -> None:
            try:
                probe()
                answer = OK
            except Exception as exc:  # any failure is this dependency's state, never the endpoint's
                answer = f"down: {exc}"
            with lock:
                answers[name] = answer

        threads = []
        for name, probe in self.probes.items():
            if probe is None:
                answers[name] = NOT_CONFIGURED
                continue
            thread = threading.Thread(target=run, args=(name, probe), name=f"readyz-{name}", daemon=True)
            thread.start()
            threads.append((name, thread))
        deadline = time.monotonic() + self.timeout_s + _GRACE_S  # a probe's own timeout fires first
        for _, thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with lock:
            for name, _ in threads:  # a probe still running past the deadline is a silent dependency
                answers.setdefault(name, f"down: no answer within {self.timeout_s:g} s")
            return {name: answers[name] for name in self.probes}

    @staticmethod
    def ready(states: Mapping[str, str]) -> bool:
        return all(state in (OK, NOT_CONFIGURED) for state in states.values())


def _aws_client(service: str, settings: Settings, timeout_s: float) -> Any:
    import boto3  # imported only by a daemon that probes AWS
    from botocore.config import Config

    config = Config(connect_timeout=timeout_s, read_timeout=timeout_s, retries={"max_attempts": 1})
    return boto3.client(service, config=config, **settings.emr.client_kwargs())  # type: ignore[call-overload]  # service is a runtime name


def _tables(catalog: Catalog) -> list[TableRef]:
    """One table per storage: an s3 bucket (or other scheme's authority), the local disk, or a lake
    catalog (asking it for a table checks the catalog and the table's storage)."""
    seen: dict[str, TableRef] = {}
    for name in catalog.names():
        table = catalog.sources[name].table
        scheme, _, rest = table.location.partition("://")
        storage = f"{scheme}://{rest.split('/', 1)[0]}" if rest else "local"
        if table.catalog is not None:
            storage = f"catalog:{table.catalog}"
        seen.setdefault(storage, table)
    return list(seen.values())


def _kms_keys(catalog: Catalog) -> list[str]:
    return sorted(
        {
            column.key_ref
            for name in catalog.names()
            for column in catalog.sources[name].encrypted_columns.values()
            if not column.key_ref.startswith("local:")
        }
    )


def readiness_for(
    settings: Settings, *, store: Store, catalog: Catalog, timeout_s: float = PROBE_TIMEOUT_S
) -> Readiness:
    """The probes this daemon's settings and catalog call for; the tables probed are read from the
    catalog at each check (a reload may move them)."""
    kafka = KafkaTopicAdmin(config=settings.kafka_config(), timeout_s=timeout_s)
    stats = LakeTableStats(catalogs=TableCatalogs(settings.lake_catalogs))
    stats.prepare(source.table.format for source in catalog.sources.values())  # not inside a probe's 2 s

    def database() -> None:
        with store.session() as session:
            session.execute(text("SELECT 1"))

    def table_storage() -> None:
        for table in _tables(catalog):
            stats.column_names(table)

    def aws_probe(service: str, name: str, call: Callable[[Any], object]) -> Probe:
        client = _aws_client(service, settings, timeout_s)  # made once: a new client costs ~1 s

        def probe() -> None:
            with aws_errors(f"{name} at {client.meta.endpoint_url}"):
                call(client)

        return probe

    probes: dict[str, Probe | None] = {
        "kafka": kafka.ping,
        **{  # each named cluster apart: the one that is down is the one named
            f"kafka:{name}": KafkaTopicAdmin(config=settings.kafka_config(name), timeout_s=timeout_s).ping
            for name in sorted(settings.kafka_clusters)
        },
        "database": database,
        "table_storage": table_storage if _tables(catalog) else None,
        "kms": aws_probe("kms", "KMS", lambda c: c.list_keys(Limit=1)) if _kms_keys(catalog) else None,
        "emr": aws_probe("emr-serverless", "EMR Serverless", lambda c: c.list_applications(maxResults=1))
        if settings.launcher == "emr"
        else None,
    }
    return Readiness(probes=probes, timeout_s=timeout_s)
