"""Shared fixtures: real services (Kafka, PostgreSQL, Spark) come from the plugin modules below."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

from tests.fixtures.leftovers import interrupt_on_sigterm, sweep

pytest_plugins = [
    "tests.fixtures.kafka",
    "tests.fixtures.database",
    "tests.fixtures.spark",
    "tests.fixtures.spark_cluster",
    "tests.fixtures.catalog_services",
    "tests.fixtures.daemon",
    "tests.fixtures.aws",
    "tests.fixtures.emr_launcher",
    "tests.fixtures.slack",
    "tests.fixtures.daemon_standin",
    "tests.fixtures.janitor",
    "tests.fixtures.browser",
]


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM interrupts the session like Ctrl-C, so every fixture's teardown runs."""
    interrupt_on_sigterm()


# A test that uses one of these fixtures needs that service, marked or not: `make test-fast` selects
# "not kafka and not spark" and must not start a broker or a Spark job. A fixture asked for with
# `request.getfixturevalue` is not in a test's closure: such a test is marked by hand.
_SERVICE_MARKS = {
    "_kafka_broker": "kafka",
    "spark": "spark",
    "spark_cluster": "spark",
    "lake_copies": "spark",
    "second_kafka_bootstrap": "kafka",
    "local_emr": "spark",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with the services its fixtures start."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for fixture, mark in _SERVICE_MARKS.items():
            if fixture in names and item.get_closest_marker(mark) is None:
                item.add_marker(mark)


def pytest_unconfigure(config: pytest.Config) -> None:
    """After the fixtures' teardown: whatever a test started and no teardown stopped."""
    sweep()


# Variables the test run itself is allowed to carry: where the session's services already run.
_KEEP = ("REPLAY_TEST_",)


@pytest.fixture(autouse=True)
def _clean_replay_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Hide REPLAY_* settings from the environment so a hidden env read fails loudly."""
    for key in list(os.environ):
        if key.startswith("REPLAY_") and not key.startswith(_KEEP):
            monkeypatch.delenv(key)
    yield


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Tests that configure logging (onto a throwaway stream) must not leave it configured.

    Otherwise a later log call, such as py4j's at interpreter exit, writes to a closed stream.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
