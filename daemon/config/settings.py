"""One settings object for every entry point, read once from `REPLAY_*` variables at start-up.

Entry points (`replayd`, `replay-bot`, `replay`) call :func:`load_settings` and pass the result
down; nothing else reads the environment, so a hidden env read fails loudly in tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from daemon.config.client_settings import DEFAULT_DAEMON_URL
from daemon.config.emr_settings import EmrSettings
from daemon.config.kafka_clusters import KafkaCluster, SecurityProtocol, check_cluster_names
from daemon.config.lake_catalogs import LakeCatalog, check_catalog_names
from daemon.core.clusters import DEFAULT_CLUSTER
from daemon.core.errors import ConfigError, UnknownCluster
from daemon.core.grammar.limits import Limits
from daemon.core.grammar.values import MAX_TPS, MAX_WORKERS

ENV_PREFIX = "REPLAY_"
# librdkafka's batching and compression: what an operator may tune for the jobs' producers. The rest
# of the producer (idempotence, acks, the partitioner, the delivery timeout) is the data path's.
# Whole numbers within librdkafka's own bounds (a value it refuses would fail every task instead).
PRODUCER_TUNING_RANGES = {
    "batch.num.messages": (1, 1_000_000),
    "batch.size": (1, 2_147_483_647),
    "compression.level": (-1, 12),
    "linger.ms": (0, 900_000),
}
PRODUCER_TUNING = frozenset({*PRODUCER_TUNING_RANGES, "compression.type"})
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")


def _split_list(value: object) -> object:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def _json_object(what: str) -> Callable[[object], object]:
    """A variable's JSON text as the object it holds (an empty one: ``{}``), for a before-validator."""

    def parse(value: object) -> object:
        if isinstance(value, str):
            try:
                return json.loads(value) if value.strip() else {}
            except json.JSONDecodeError as exc:
                raise ValueError(f"not a JSON object of {what}: {exc}") from None
        return value

    return parse


class Settings(BaseSettings):
    """Everything the platform's processes need; secrets are `SecretStr` so they never print."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="ignore", frozen=True
    )

    state_dir: Path = Field(
        default=Path(".state"), description="the SQLite store, local job specs and job logs live here"
    )
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; default: a SQLite file under the state directory"
    )

    kafka_bootstrap: str = Field(default="127.0.0.1:9092", description="the Kafka brokers (host:port,…)")
    kafka_security_protocol: SecurityProtocol = Field(
        default="PLAINTEXT", description="librdkafka security.protocol, for the daemon and the jobs"
    )
    kafka_sasl_mechanism: str | None = Field(default=None, description="e.g. SCRAM-SHA-512 or PLAIN")
    kafka_sasl_username: str | None = Field(default=None, description="SASL user of the daemon and its jobs")
    kafka_sasl_password: SecretStr | None = Field(
        default=None, description="SASL password; travels in the run's spec (docs/decisions/0015)"
    )
    kafka_clusters: Annotated[dict[str, KafkaCluster], NoDecode] = Field(
        default_factory=dict,
        description="more Kafka clusters by name, a JSON object of name to {bootstrap, security_protocol, "
        "sasl_mechanism, sasl_username, sasl_password} (daemon.config.kafka_clusters); the one above "
        "is `default`, and a source's `cluster:` names one",
    )
    kafka_message_timeout_ms: int | None = Field(
        default=None, gt=0, description="the job's producer delivery timeout (librdkafka message.timeout.ms)"
    )
    kafka_producer: Annotated[dict[str, int | str], NoDecode] = Field(
        default_factory=dict,
        description="the jobs' producer tuning, a JSON object of librdkafka settings: "
        + ", ".join(sorted(PRODUCER_TUNING))
        + " (docs/decisions/0055), for every run (a long linger.ms holds paced records back too); "
        "idempotence, acks and the partitioner are the data path's",
    )
    topic_retention_ms: int = Field(
        default=7 * 24 * 3600 * 1000,
        gt=0,
        description="retention.ms of the replay and pipeline topics it creates",
    )
    progress_topic: str = Field(
        default="replay.progress", description="where running jobs send progress beacons"
    )
    progress_interval_s: float = Field(
        default=10.0, gt=0, description="seconds between two beacons of a job task"
    )
    lag_sample_s: float = Field(
        default=1.0, ge=0, le=30, description="`lag`: seconds between its two samples (0: no drain)"
    )
    control_topic: str = Field(
        default="replay.control", description="live rate changes for running jobs (one partition)"
    )
    control_lead_s: float = Field(
        default=1.0, ge=0.5, le=30, description="a rate change takes effect this long after it is asked for"
    )
    control_retention_ms: int = Field(
        default=7 * 24 * 3600 * 1000, gt=0, description="the control topic's retention: longer than any run"
    )
    watch_interval_s: float = Field(
        default=5.0, gt=0, le=300, description="`watch=`: seconds between two samples of a watched group"
    )
    watch_timeout_s: float = Field(
        default=1800.0, gt=0, description="`watch=`: after the run's end, an unfinished watch gives up"
    )
    max_pause_s: float = Field(
        default=3600.0, gt=0, description="a run paused longer than this is cancelled by the watcher"
    )

    catalog_path: Path = Field(
        default=Path("examples/sources.yaml"), description="the sources catalog (YAML)"
    )
    lake_catalogs: Annotated[dict[str, LakeCatalog], NoDecode] = Field(
        default_factory=dict,
        description="catalogs sources may name tables in, as JSON: "
        '{"lake": {"type": "sql", "uri": "postgresql+psycopg://user@host/db", "password": "…"}} '
        "(Iceberg tables: types sql, rest, glue, hive, hadoop; Delta and Parquet tables: glue, the "
        'Data Catalog, and hive, a metastore; "session": true on one of those makes it Spark\'s '
        "session catalog, for two-part names; daemon.config.lake_catalogs)",
    )
    launcher: Literal["local", "emr", "spark"] = Field(
        default="local",
        description="`local`: spark-submit on this machine; `emr`: EMR Serverless; `spark`: spark-submit "
        "to the cluster at REPLAY_SPARK_MASTER (docs/decisions/0056)",
    )
    spark_master: str | None = Field(
        default=None,
        description="the cluster `launcher=spark` submits to: spark://host:port, k8s://https://host, yarn",
    )
    spark_executor_cores: int = Field(
        default=1,
        ge=1,
        le=64,
        description="`launcher=spark`: cores of each executor (a run's workers= is executors)",
    )
    spark_executor_memory: str = Field(
        default="1g", pattern=r"^[1-9][0-9]*[mg]$", description="`launcher=spark`: each executor's memory"
    )
    spark_python: str | None = Field(
        default=None,
        description="`launcher=spark`: the Python the executors run on the cluster's nodes "
        "(spark.pyspark.python), with the job's dependencies; default: this daemon's interpreter path",
    )
    spark_executor_wait_s: float = Field(
        default=120.0,
        gt=0,
        description="`launcher=spark`: how long a job waits for every executor it asked for before it fails",
    )
    emr: EmrSettings = Field(
        default_factory=EmrSettings, description="REPLAY_EMR__<FIELD>, e.g. REPLAY_EMR__BUCKET"
    )
    spark_submit: str | None = Field(default=None, description="default: the one installed with pyspark")
    local_key_dir: Path | None = Field(
        default=None, description="where local:<name> PII keys live (<name>.key); development only"
    )
    local_workers: int = Field(
        default=2, ge=1, le=64, description="Spark task slots when a request names none"
    )
    local_jars: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="jars every local job gets with --jars, comma-separated: the Iceberg and Delta "
        "runtimes of the EMR release (`scripts/lake-jars` fetches them and prints the list)",
    )
    local_standby: bool = Field(
        default=True,
        description="keep a standby driver (past its JVM and SparkSession) for the next run of "
        "local_workers slots, within the admission limit (daemon.adapters.local_standby)",
    )
    local_class_archive: bool = Field(
        default=True,
        description="start local drivers with a JVM class-data archive of Spark's classes, built once per "
        "install in the background (daemon.adapters.spark_class_archive)",
    )
    local_class_archive_dir: Path | None = Field(
        default=None,
        description="where that archive lives; default: $XDG_CACHE_HOME/kafka-replay/spark-classes",
    )
    local_run_dirs_keep_days: float = Field(
        default=30.0,
        gt=0,
        description="days a released local run's folder (its logs, its result) stays after it was last "
        "written, and a job package zip after its last use (daemon.adapters.local_launcher)",
    )
    local_standby_max_idle_s: float = Field(
        default=600.0, ge=10, description="a standby driver unused this long is replaced by a fresh one"
    )
    local_max_concurrent_runs: int | None = Field(
        default=None,
        ge=1,
        description="jobs the local launcher runs at once, the rest wait in line (`queue_position`); "
        "default: one per 2 cores and 2 GiB, at least 1 (local_launcher.default_max_concurrent_runs)",
    )
    eta_startup_s: float | None = Field(
        default=None,
        ge=0,
        description="start-up the ETA assumes until the launcher has finished runs to learn it from; "
        "default: 20 s local, 90 s EMR (daemon.usecases.eta)",
    )
    eta_history_runs: int = Field(
        default=10, ge=0, description="recent runs the ETA's start-up is learned from (0: the default only)"
    )
    watcher_poll_s: float = Field(
        default=1.0, gt=0, description="seconds between two passes of the run watcher"
    )
    lease_ttl_s: float = Field(
        default=15.0, gt=0, description="a crashed daemon's runs pass to another daemon after this"
    )
    progress_notify_every_s: float = Field(
        default=10.0, ge=0, description="the run's progress message is edited at most this often"
    )
    idle_after_days: int = Field(default=30, ge=1, description="a pipeline with no publish this long is idle")
    idle_grace_days: int = Field(default=7, ge=0, description="days owners have to answer before removal")
    idle_keep_days: int = Field(default=30, ge=1, description="how long 'Keep' snoozes the question")
    janitor_schedule: str = Field(default="cron=0 9 * * *", description="when the idle clean-up runs (UTC)")
    max_tps: int = Field(
        default=Limits().max_tps, gt=0, le=MAX_TPS, description="the highest rate a user may ask for"
    )
    default_tps: int = Field(default=1_000, gt=0, description="the rate when a request names none")
    max_workers: int = Field(
        default=Limits().max_workers, ge=1, le=MAX_WORKERS, description="the most workers a user may ask for"
    )
    max_active_runs_per_user: int = Field(
        default=5, ge=1, description="one requester's unfinished replays (queued + going); admins are exempt"
    )
    max_active_runs: int = Field(
        default=50, ge=1, description="unfinished runs of any kind (queued + going): more replays are refused"
    )
    max_reconciles_per_user: int = Field(
        default=1,
        ge=1,
        description="one person's unfinished reconciles (each reads a topic); admins are exempt",
    )
    max_slow_calls_per_user: int = Field(
        default=2,
        ge=1,
        description="API calls of one caller that take seconds (lag, rewind, chart) at a time",
    )
    max_slow_calls: int = Field(
        default=16,
        ge=1,
        description="such calls of everyone at a time: the API's worker threads stay free for the rest",
    )
    adhoc_reserved_runs: int | None = Field(
        default=None,
        ge=0,
        description=(
            "of max_active_runs, kept for replays people ask for (a pipeline's slot waits instead); "
            "default a fifth of max_active_runs"
        ),
    )
    max_pipelines_per_user: int = Field(
        default=10,
        ge=1,
        description="pipelines one person may have scheduled (not unscheduled); admins are exempt",
    )
    max_pipelines_per_source: int = Field(
        default=20, ge=1, description="pipelines of one source (not unscheduled), whoever scheduled them"
    )
    replay_topic_ttl_hours: float = Field(
        default=7 * 24.0, gt=0, description="a one-off replay.* topic is deleted this long after its run"
    )
    replay_topic_notice_hours: float = Field(
        default=24.0, ge=0, description="the requester is told this long before their replay topic is deleted"
    )
    replay_topic_check_s: float = Field(
        default=300.0, gt=0, description="seconds between two passes of the replay topics' TTL"
    )
    deprovision_check_s: float = Field(
        default=10.0,
        gt=0,
        description="seconds between two looks at pipelines being removed (an unschedule's stopping run)",
    )
    live_replay_guard_hours: float = Field(
        default=24.0, ge=0, description="refuse live replays overlapping one that succeeded this recently"
    )

    slack_bot_token: SecretStr | None = Field(default=None, description="the Slack app's bot token (xoxb-…)")
    slack_signing_secret: SecretStr | None = Field(
        default=None, description="checks that a request to the bot comes from Slack"
    )
    slack_app_token: SecretStr | None = Field(
        default=None, description="Socket Mode instead of HTTP (xapp-…); no public endpoint needed"
    )
    slack_api_url: str = Field(
        default="https://slack.com/api/", description="Slack's Web API (the demo points it at a stand-in)"
    )
    slack_platform_channel: str | None = Field(
        default=None, description="runs started from the CLI, and DMs that could not be delivered"
    )
    bot_host: str = Field(default="127.0.0.1", description="the address replay-bot listens on")
    bot_port: int = Field(default=3000, ge=0, le=65535, description="the port replay-bot listens on")

    instance_id: str | None = Field(default=None, description="lease owner name; default host:port")
    daemon_url: str = Field(default=DEFAULT_DAEMON_URL, description="where the bot and the CLI find replayd")
    pages_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/]+(/[^\s]*)?$",
        description="where people's browsers reach replayd's pages (the login links point there); "
        "default: REPLAY_DAEMON_URL",
    )
    page_link_minutes: float = Field(
        default=10.0,
        gt=0,
        le=1440,
        description="a page link signs its user in only this long after it is made",
    )
    page_session_hours: float = Field(
        default=12.0, gt=0, le=24 * 30, description="how long a browser stays signed in to the pages"
    )
    daemon_host: str = Field(default="127.0.0.1", description="the address replayd listens on")
    daemon_port: int = Field(default=8700, ge=0, le=65535, description="the port replayd listens on")
    api_token: SecretStr | None = Field(
        default=None,
        description="replayd and the bot: the service token, which may act as anyone (X-Replay-Actor); "
        "the CLI: your personal token",
    )
    user: str | None = Field(default=None, description="the CLI user's Slack id (who is asking)")
    admins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Slack user ids allowed to replay any source"
    )
    # personal API tokens, as `<user id>:<sha256 hex of the token>` (`replayd token <user>` makes one)
    user_tokens: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="personal tokens as `<user id>:<sha256 hex>`, each acting as its user only "
        "(`replayd token <user>` makes one)",
    )

    log_format: Literal["console", "json"] = Field(
        default="console", description="`json`: JSON lines, for production"
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="the lowest level logged"
    )

    _split_admins = field_validator("admins", mode="before")(_split_list)
    _split_user_tokens = field_validator("user_tokens", mode="before")(_split_list)
    _split_local_jars = field_validator("local_jars", mode="before")(_split_list)
    _catalog_names = field_validator("lake_catalogs")(check_catalog_names)
    _cluster_names = field_validator("kafka_clusters")(check_cluster_names)
    _clusters_json = field_validator("kafka_clusters", mode="before")(
        _json_object("cluster name to settings")
    )

    _catalogs_json = field_validator("lake_catalogs", mode="before")(_json_object("catalog name to settings"))
    _producer_json = field_validator("kafka_producer", mode="before")(_json_object("librdkafka settings"))

    @field_validator("kafka_producer")
    @classmethod
    def _producer_tuning_only(cls, value: dict[str, int | str]) -> dict[str, int | str]:
        others = sorted(set(value) - PRODUCER_TUNING)
        if others:
            raise ValueError(
                f"{', '.join(others)} cannot be set here: only {', '.join(sorted(PRODUCER_TUNING))}"
            )
        for name, setting in value.items():
            if name == "compression.type":
                if setting not in COMPRESSION_TYPES:
                    raise ValueError(
                        f"compression.type is one of {', '.join(COMPRESSION_TYPES)}, got {setting!r}"
                    )
                continue
            low, high = PRODUCER_TUNING_RANGES[name]
            if not isinstance(setting, int) or isinstance(setting, bool) or not low <= setting <= high:
                raise ValueError(f"{name} is a whole number from {low:,} to {high:,}, got {setting!r}")
        return value

    @field_validator("local_jars")
    @classmethod
    def _jars_exist(cls, value: list[Path]) -> list[Path]:
        missing = [str(jar) for jar in value if not jar.is_file()]
        if missing:
            raise ValueError(f"no such jar: {', '.join(missing)} (scripts/lake-jars fetches the lake jars)")
        return value

    @field_validator("user_tokens")
    @classmethod
    def _user_token_entries(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            user, _, digest = entry.partition(":")
            if not user or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise ValueError(
                    f"'{entry[:20]}…' is not '<user id>:<sha256 hex>' (make one with `replayd token <user>`)"
                )
        return entries

    def user_token_digests(self) -> dict[str, str]:
        """Personal tokens' SHA-256 -> the user each one acts as."""
        return {entry.partition(":")[2]: entry.partition(":")[0] for entry in self.user_tokens}

    @model_validator(mode="after")
    def _cluster_named(self) -> Settings:
        if self.launcher == "spark" and not self.spark_master:
            raise ValueError("REPLAY_LAUNCHER=spark needs REPLAY_SPARK_MASTER (e.g. spark://host:7077)")
        if self.spark_master is not None and not self.spark_master.startswith(("spark://", "k8s://", "yarn")):
            raise ValueError(
                f"REPLAY_SPARK_MASTER must be spark://host:port, k8s://… or yarn, not {self.spark_master!r} "
                "(local jobs: REPLAY_LAUNCHER=local)"
            )
        return self

    @model_validator(mode="after")
    def _reserve_below_the_cap(self) -> Settings:
        if self.adhoc_reserved_runs is not None and self.adhoc_reserved_runs >= self.max_active_runs:
            raise ValueError(
                f"REPLAY_ADHOC_RESERVED_RUNS ({self.adhoc_reserved_runs}) must be below "
                f"REPLAY_MAX_ACTIVE_RUNS ({self.max_active_runs}), or no pipeline could ever run"
            )
        return self

    @property
    def reserved_runs(self) -> int:
        """Unfinished runs kept for people's replays: pipelines may use the rest of the total."""
        if self.adhoc_reserved_runs is not None:
            return self.adhoc_reserved_runs
        return self.max_active_runs // 5

    @model_validator(mode="after")
    def _default_database(self) -> Settings:
        if self.database_url is None:
            object.__setattr__(self, "database_url", f"sqlite:///{self.state_dir / 'replay.db'}")
        return self

    @property
    def limits(self) -> Limits:
        """The rate and workers the service allows, for the grammar to refuse more where it is typed."""
        return Limits(max_tps=self.max_tps, max_workers=self.max_workers)

    @property
    def db_url(self) -> str:
        assert self.database_url is not None  # set by the validator
        return self.database_url

    @property
    def kafka_cluster_names(self) -> tuple[str, ...]:
        """Every cluster the daemon reaches: the default one first."""
        return (DEFAULT_CLUSTER, *sorted(self.kafka_clusters))

    def kafka_config(self, cluster: str = DEFAULT_CLUSTER) -> dict[str, str]:
        """librdkafka client settings of one cluster, shared by the daemon's clients and the jobs'
        producers; UnknownCluster for a name with no settings."""
        if cluster != DEFAULT_CLUSTER:
            if cluster not in self.kafka_clusters:
                raise UnknownCluster(cluster, self.kafka_cluster_names)
            return self.kafka_clusters[cluster].config()
        return KafkaCluster(
            bootstrap=self.kafka_bootstrap,
            security_protocol=self.kafka_security_protocol,
            sasl_mechanism=self.kafka_sasl_mechanism,
            sasl_username=self.kafka_sasl_username,
            sasl_password=self.kafka_sasl_password,
        ).config()

    def secret_values(self) -> list[str]:
        """The configured secrets, handed to the log redactor so their values never reach a log line."""
        fields = (
            self.kafka_sasl_password,
            self.slack_bot_token,
            self.slack_signing_secret,
            self.slack_app_token,
            self.api_token,
            *(catalog.password for catalog in self.lake_catalogs.values()),
            *(cluster.sasl_password for cluster in self.kafka_clusters.values()),
        )
        return [f.get_secret_value() for f in fields if f is not None]

    def require(self, *names: str) -> None:
        """Fail at start-up, naming the variable, when an entry point needs a setting left unset."""
        for name in names:
            if getattr(self, name) in (None, ""):
                raise ConfigError(f"{ENV_PREFIX}{name.upper()} is required but not set")


def load_settings(environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Build settings from `environ` (default: the process environment) and explicit overrides.

    Any validation problem becomes one `ConfigError` line that names the variable.
    """
    try:
        if environ is None:
            return Settings(**overrides)  # __init__ reads the environment (model_validate would not)
        values: dict[str, object] = {}
        for key, value in environ.items():
            if not key.startswith(ENV_PREFIX):
                continue
            name, _, nested = key[len(ENV_PREFIX) :].lower().partition("__")
            if nested:
                section = values.setdefault(name, {})
                if isinstance(section, dict):
                    section[nested] = value
            else:
                values[name] = value
        values.update(overrides)
        return Settings.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        if not first["loc"]:  # a rule between settings: its message names them
            raise ConfigError(str(first["msg"]).removeprefix("Value error, ")) from None
        variable, *inside = (str(part) for part in first["loc"])
        within = f" ({'.'.join(inside)})" if inside else ""  # the entry of a JSON setting, and its field
        problem = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"{ENV_PREFIX}{variable.upper()}{within}: {problem}") from None
