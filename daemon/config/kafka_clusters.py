"""The Kafka clusters beside the default one, configured once for the daemon and its jobs.

`REPLAY_KAFKA_CLUSTERS` is a JSON object of cluster name to its settings, for example
``{"eu": {"bootstrap": "b1.eu:9092,b2.eu:9092", "security_protocol": "SASL_SSL", "sasl_mechanism":
"SCRAM-SHA-512", "sasl_username": "replay", "sasl_password": "…"}}``. The cluster that
`REPLAY_KAFKA_BOOTSTRAP` and the other Kafka settings describe is ``default``. A source's
``cluster:`` in the catalog names one; its runs' topics, dead letters, progress beacons and live
control all go there (docs/decisions/0058).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from daemon.core.clusters import DEFAULT_CLUSTER, check_cluster_name

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]


class KafkaCluster(BaseModel):
    """One cluster's connection: where its brokers are and how the daemon and the jobs log in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bootstrap: str = Field(min_length=1, description="its brokers (host:port,…)")
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = Field(
        default=None, description="travels in the specs of the runs on this cluster (docs/decisions/0015)"
    )

    def config(self) -> dict[str, str]:
        """librdkafka client settings for the daemon's clients and the jobs' producers."""
        config = {"bootstrap.servers": self.bootstrap, "security.protocol": self.security_protocol}
        if self.sasl_mechanism:
            config["sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_username:
            config["sasl.username"] = self.sasl_username
        if self.sasl_password:
            config["sasl.password"] = self.sasl_password.get_secret_value()
        return config


def check_cluster_names(clusters: dict[str, KafkaCluster]) -> dict[str, KafkaCluster]:
    """Names as `cluster=` types them; ``default`` is the one `REPLAY_KAFKA_BOOTSTRAP` describes, so
    it is not named here."""
    for name in clusters:
        check_cluster_name(name)
        if name == DEFAULT_CLUSTER:
            raise ValueError(
                f"'{DEFAULT_CLUSTER}' is the cluster REPLAY_KAFKA_BOOTSTRAP and its settings describe: "
                "give this one another name"
            )
    return clusters
