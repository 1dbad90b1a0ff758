"""Kafka clusters by name: a source's topics live on one of the daemon's clusters.

An estate has more than one Kafka cluster (production and staging, one per region). The daemon
knows each by a name (`REPLAY_KAFKA_CLUSTERS`); the one `REPLAY_KAFKA_BOOTSTRAP` describes is
``default``. A source names its cluster in the catalog; a run and a pipeline record the cluster they
were created on, so their topics are found there later whatever the catalog says then.
"""

from __future__ import annotations

import re
from collections.abc import Collection

DEFAULT_CLUSTER = "default"
CLUSTER_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


def check_cluster_name(name: str) -> str:
    """A cluster name as typed (`cluster=eu-west`) or configured: lower case, short, no spaces."""
    if not CLUSTER_NAME.match(name):
        raise ValueError(
            f"'{name}' is not a cluster name (lower-case letters, digits, '-' and '_', up to 32, "
            "starting with a letter)"
        )
    return name


def unknown_cluster(name: str, known: Collection[str]) -> str:
    """What to say of a cluster name the daemon has no settings for, with the next step."""
    return (
        f"unknown Kafka cluster '{name}' (this service's clusters: {', '.join(sorted(known))}): "
        "name one of them, or add it to REPLAY_KAFKA_CLUSTERS"
    )
