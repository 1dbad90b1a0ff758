from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config.settings import load_settings
from daemon.core.errors import ConfigError, UnknownCluster


def test_defaults_put_the_database_under_the_state_directory() -> None:
    settings = load_settings({"REPLAY_STATE_DIR": "/srv/replay"})

    assert settings.db_url == "sqlite:////srv/replay/replay.db"
    assert settings.launcher == "local"


def test_admins_are_read_from_a_comma_separated_list() -> None:
    settings = load_settings({"REPLAY_ADMINS": "U1AAA, U2BBB,"})

    assert settings.admins == ["U1AAA", "U2BBB"]


def test_invalid_value_names_the_variable() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"REPLAY_LAUNCHER": "yarn"})

    assert str(caught.value).startswith("REPLAY_LAUNCHER: ")


def test_missing_required_setting_names_the_variable() -> None:
    settings = load_settings({})

    with pytest.raises(ConfigError, match="REPLAY_SLACK_SIGNING_SECRET is required"):
        settings.require("slack_signing_secret")


def test_secrets_do_not_appear_in_the_settings_repr() -> None:
    settings = load_settings({"REPLAY_API_TOKEN": "tok-very-secret", "REPLAY_SLACK_BOT_TOKEN": "xoxb-1-2"})

    assert "tok-very-secret" not in repr(settings)
    assert settings.secret_values() == ["xoxb-1-2", "tok-very-secret"]


def test_process_environment_is_read_when_no_mapping_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAY_STATE_DIR", "/tmp/replay-env")

    assert load_settings().state_dir == Path("/tmp/replay-env")


def test_kafka_config_carries_sasl_credentials() -> None:
    settings = load_settings(
        {
            "REPLAY_KAFKA_BOOTSTRAP": "b:9093",
            "REPLAY_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "REPLAY_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "REPLAY_KAFKA_SASL_USERNAME": "svc",
            "REPLAY_KAFKA_SASL_PASSWORD": "pw",
        }
    )

    assert settings.kafka_config() == {
        "bootstrap.servers": "b:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "svc",
        "sasl.password": "pw",
    }


def test_a_reserve_for_replays_as_large_as_the_cap_is_refused_naming_both_settings() -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings({"REPLAY_MAX_ACTIVE_RUNS": "3", "REPLAY_ADHOC_RESERVED_RUNS": "3"})
    assert str(refused.value) == (
        "REPLAY_ADHOC_RESERVED_RUNS (3) must be below REPLAY_MAX_ACTIVE_RUNS (3), "
        "or no pipeline could ever run"
    )
    assert load_settings({"REPLAY_MAX_ACTIVE_RUNS": "3"}).reserved_runs == 0  # a fifth, rounded down
    assert load_settings({}).reserved_runs == 10


CATALOGS = (
    '{"lake": {"type": "sql", "uri": "postgresql+psycopg://lake@db.internal/lake", "password": "pw-lake-9",'
    ' "warehouse": "s3://bucket/wh"}, "wh": {"type": "hadoop", "warehouse": "/srv/warehouse"}}'
)


def test_lake_catalogs_are_read_from_json_with_their_passwords_secret() -> None:
    settings = load_settings({"REPLAY_LAKE_CATALOGS": CATALOGS})

    assert sorted(settings.lake_catalogs) == ["lake", "wh"]
    assert settings.lake_catalogs["wh"].warehouse == "/srv/warehouse"
    assert "pw-lake-9" in settings.secret_values()  # handed to the log redactor
    assert "pw-lake-9" not in repr(settings)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("{not json", "not a JSON object"),
        ('{"lake": {"type": "nessie"}}', "Input should be 'sql', 'rest', 'glue', 'hive' or 'hadoop'"),
        ('{"lake": {"type": "hive"}}', "a hive catalog needs 'uri'"),
        ('{"lake": {"type": "sql"}}', "a sql catalog needs 'uri'"),
        ('{"lake": {"type": "hadoop"}}', "a hadoop catalog needs 'warehouse'"),
        ('{"lake": {"type": "sql", "uri": "postgresql://u:pw@h/d"}}', "put the password in 'password'"),
        ('{"my.lake": {"type": "glue"}}', "'my.lake' is not a catalog name"),
        ('{"lake": {"type": "hadoop", "warehouse": "/w", "session": true}}', "not a hadoop one"),
        (
            '{"a": {"type": "glue", "session": true}, "b": {"type": "hive", "uri": "thrift://h:9083", '
            '"session": true}}',
            "only one catalog can be Spark's session catalog ('session'): a, b",
        ),
    ],
)
def test_a_bad_lake_catalog_names_the_variable_and_the_problem(value: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"REPLAY_LAKE_CATALOGS": value})

    assert str(caught.value).startswith("REPLAY_LAKE_CATALOGS")  # and the entry's field, when one is at fault
    assert problem in str(caught.value)


@pytest.mark.parametrize("value", ["{not json", ""])
def test_a_bad_lake_catalogs_variable_in_the_environment_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """As `replayd` reads it: from the process environment, not from a mapping."""
    monkeypatch.setenv("REPLAY_LAKE_CATALOGS", value)

    if value:
        with pytest.raises(ConfigError, match=r"REPLAY_LAKE_CATALOGS: .*not a JSON object"):
            load_settings()
    else:
        assert load_settings().lake_catalogs == {}  # set but empty: no catalogs


def test_producer_tuning_is_read_from_json() -> None:
    settings = load_settings({"REPLAY_KAFKA_PRODUCER": '{"linger.ms": 20, "compression.type": "zstd"}'})

    assert settings.kafka_producer == {"linger.ms": 20, "compression.type": "zstd"}
    assert load_settings({}).kafka_producer == {}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ('{"enable.idempotence": false}', "enable.idempotence cannot be set here: only batch.num.messages"),
        ('{"acks": 1, "partitioner": "random"}', "acks, partitioner cannot be set here"),
        ('{"compression.type": "brotli"}', "compression.type is one of none, gzip, snappy, lz4, zstd"),
        ('{"linger.ms": "10"}', "linger.ms is a whole number from 0 to 900,000, got '10'"),
        ('{"batch.size": 0}', "batch.size is a whole number from 1 to 2,147,483,647, got 0"),
        ('{"compression.level": 13}', "compression.level is a whole number from -1 to 12, got 13"),
        ('{"queue.buffering.max.kbytes": 64}', "queue.buffering.max.kbytes cannot be set here"),
        ("linger.ms=10", "not a JSON object of librdkafka settings"),
    ],
)
def test_producer_settings_outside_the_tuning_are_refused_naming_the_variable(
    value: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"REPLAY_KAFKA_PRODUCER": value})

    assert "REPLAY_KAFKA_PRODUCER" in str(caught.value)
    assert problem in str(caught.value)


def test_the_cluster_launcher_needs_a_cluster_url_it_can_submit_to() -> None:
    with pytest.raises(ConfigError, match=r"REPLAY_LAUNCHER=spark needs REPLAY_SPARK_MASTER"):
        load_settings({"REPLAY_LAUNCHER": "spark"})
    with pytest.raises(ConfigError, match=r"must be spark://host:port, k8s://… or yarn, not 'local\[2\]'"):
        load_settings({"REPLAY_LAUNCHER": "spark", "REPLAY_SPARK_MASTER": "local[2]"})

    settings = load_settings({"REPLAY_LAUNCHER": "spark", "REPLAY_SPARK_MASTER": "spark://10.0.0.5:7077"})

    assert (settings.spark_master, settings.spark_executor_cores, settings.spark_executor_memory) == (
        "spark://10.0.0.5:7077",
        1,
        "1g",
    )


def test_named_kafka_clusters_come_beside_the_default_with_their_passwords_secret() -> None:
    settings = load_settings(
        {
            "REPLAY_KAFKA_BOOTSTRAP": "home:9092",
            "REPLAY_KAFKA_CLUSTERS": '{"eu-west": {"bootstrap": "eu:9092", "security_protocol": "SASL_SSL", '
            '"sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "replay", "sasl_password": "eu-pw"}}',
        }
    )

    assert settings.kafka_cluster_names == ("default", "eu-west")
    assert settings.kafka_config()["bootstrap.servers"] == "home:9092"
    assert settings.kafka_config("eu-west") == {
        "bootstrap.servers": "eu:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "replay",
        "sasl.password": "eu-pw",
    }
    assert "eu-pw" in settings.secret_values() and "eu-pw" not in repr(settings)
    with pytest.raises(
        UnknownCluster, match=r"unknown Kafka cluster 'us' \(this service's clusters: default, eu-west\)"
    ):
        settings.kafka_config("us")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ('{"default": {"bootstrap": "x:1"}}', "'default' is the cluster REPLAY_KAFKA_BOOTSTRAP"),
        ('{"EU": {"bootstrap": "x:1"}}', "'EU' is not a cluster name"),
        ('{"eu": {}}', "(eu.bootstrap): Field required"),
        ('{"eu": {"bootstrap": "x:1", "colour": "blue"}}', "(eu.colour)"),
        ("[1]", "REPLAY_KAFKA_CLUSTERS"),
    ],
)
def test_a_bad_kafka_clusters_variable_names_it_and_the_problem(value: str, problem: str) -> None:
    with pytest.raises(ConfigError, match="REPLAY_KAFKA_CLUSTERS") as caught:
        load_settings({"REPLAY_KAFKA_CLUSTERS": value})
    assert problem in str(caught.value)


def test_a_pages_url_that_is_not_a_web_address_is_refused_naming_the_variable() -> None:
    """Every page link would lead nowhere: refused at start-up, not found out from a user."""
    with pytest.raises(ConfigError, match="REPLAY_PAGES_URL"):
        load_settings({"REPLAY_PAGES_URL": "replay.example.com"})
    assert (
        load_settings({"REPLAY_PAGES_URL": "https://replay.example.com/"}).pages_url
        == "https://replay.example.com/"
    )
