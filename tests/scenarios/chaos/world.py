"""What every chaos scenario stands on: a broker, a PostgreSQL cluster, Slack, a table, daemons.

The broker and the PostgreSQL cluster are the suite's own (restarting them must not disturb anything
else on the machine); the Slack stand-in runs in this process so a scenario can make it answer 429s
and 500s; each daemon is `replayd` as a child process so SIGKILL is a real crash.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from scripts.devtools.sample_table import write_sample_table
from scripts.devtools.slack_standin import SlackStandin
from tests.fixtures.daemon import API_TOKEN, OWNER, OWNER_TOKEN, DaemonProcess, running_daemon
from tests.fixtures.kafka import LocalBroker, _start_broker
from tests.fixtures.slack import BOT_TOKEN, SIGNING_SECRET, BotUnderTest, serve_bot
from tests.fixtures.spark import SAMPLE_DAYS, SAMPLE_ROWS_PER_DAY, SAMPLE_START

REPO = Path(__file__).resolve().parents[3]
LOCAL_POSTGRES = REPO / "scripts" / "local-postgres"
CHANNEL = "C0CHAOS"  # where runs created through the API are announced
PG_CLUSTER = "replay_chaos"
PG_PORT = 54339


@dataclass
class Postgres:
    """A cluster of the suite's own, with a password of its own, so it can be restarted at will."""

    password: str = field(default_factory=lambda: f"chaos-{secrets.token_hex(8)}")
    port: int = PG_PORT

    def _script(self, action: str) -> str:
        env = {**os.environ, "REPLAY_PG_CLUSTER": PG_CLUSTER, "REPLAY_PG_PORT": str(self.port)}
        done = subprocess.run(
            [str(LOCAL_POSTGRES), action], env=env, capture_output=True, text=True, timeout=900, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"local-postgres {action} failed:\n{done.stderr[-2000:]}")
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""

    def start(self) -> None:
        url = self._script("start")  # leaves the role's password at the script's default
        self.port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        with psycopg.connect(self._dsn("replay", "replay_test"), autocommit=True) as conn:
            conn.execute(f"ALTER ROLE replay PASSWORD '{self.password}'")

    def stop(self) -> None:
        self._script("stop")

    def restart(self, down_s: float) -> None:
        """Down for `down_s` seconds, then up with the suite's password again."""
        self.stop()
        time.sleep(down_s)
        self.start()

    def _dsn(self, password: str, database: str) -> str:
        return f"postgresql://replay:{password}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; its SQLAlchemy URL."""
        name = f"chaos_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self._dsn(self.password, "replay_test"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} OWNER replay")
        return f"postgresql+psycopg://replay:{self.password}@127.0.0.1:{self.port}/{name}"


@dataclass
class World:
    root: Path
    broker: LocalBroker
    postgres: Postgres
    slack: SlackStandin
    table: Path
    daemons: list[DaemonProcess] = field(default_factory=list)
    bots: list[BotUnderTest] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def secrets(self) -> dict[str, str]:
        """Values that must never appear in a log, by name."""
        return {
            "api token": API_TOKEN,
            "personal token": OWNER_TOKEN,
            "slack bot token": BOT_TOKEN,
            "slack signing secret": SIGNING_SECRET,
            "database password": self.postgres.password,
        }

    def daemon(
        self,
        name: str,
        *,
        database_url: str | None = None,
        extra: dict[str, str] | None = None,
        owners: list[str] | None = None,
        crash_point: str | None = None,
    ) -> DaemonProcess:
        """A started `replayd` posting to the stand-in; on PostgreSQL when `database_url` is given,
        armed to SIGKILL itself at `crash_point` (`tests.fixtures.crash_points`) when given."""
        daemon = running_daemon(
            self.root / name,
            sample_table=self.table,
            bootstrap=self.bootstrap,
            database_url=database_url,
            source_extra={"owners": [OWNER, *(owners or [])]},
            standby=True,  # the product's default: kills and restarts meet standbys too
            extra={
                "REPLAY_SLACK_BOT_TOKEN": BOT_TOKEN,
                "REPLAY_SLACK_API_URL": self.slack.base_url,
                "REPLAY_SLACK_PLATFORM_CHANNEL": CHANNEL,
                "REPLAY_PROGRESS_NOTIFY_EVERY_S": "2",
                "PYTHONUNBUFFERED": "1",  # a SIGKILL must not take buffered log lines with it
                # The scenarios queue more runs per person than the default caps admit
                # (tests/runtime/test_api_limits.py holds the caps themselves); here the queue and the
                # crashes are under test.
                "REPLAY_MAX_ACTIVE_RUNS_PER_USER": "100",
                "REPLAY_MAX_ACTIVE_RUNS": "200",
                **(extra or {}),
            },
            crash_point=crash_point,
        )
        self.daemons.append(daemon)
        return daemon

    def bot(self, daemon: DaemonProcess) -> BotUnderTest:
        """The Bolt app over HTTP in front of `daemon`, on the stand-in."""
        served = serve_bot(self.slack, daemon.url, daemon.token, daemon_timeout_s=30.0)
        self.bots.append(served)
        return served

    def log_files(self) -> list[Path]:
        """Every log the daemons and their jobs wrote."""
        return sorted(path for path in self.root.rglob("*.log") if path.is_file())

    def stop_all(self) -> None:
        for bot in self.bots:
            bot.server.stop()
        for daemon in self.daemons:
            daemon.stop()
        self.bots.clear()
        self.daemons.clear()


@contextlib.contextmanager
def _one_at_a_time() -> Iterator[None]:
    """The PostgreSQL cluster is shared by every chaos run on the machine and each one stops it at its
    end: a second run (`make chaos` while `make test` runs the short form) waits for the first."""
    with (Path(tempfile.gettempdir()) / f"replay-{PG_CLUSTER}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def world(root: Path, broker: LocalBroker | None = None) -> Iterator[World]:
    """Everything a scenario needs; a broker of its own unless one to restart is handed in."""
    with _one_at_a_time():
        yield from _world(root, broker)


def _world(root: Path, broker: LocalBroker | None) -> Iterator[World]:
    root.mkdir(parents=True, exist_ok=True)
    table = root / "lake" / "orders"
    write_sample_table(table, SAMPLE_START, SAMPLE_DAYS, SAMPLE_ROWS_PER_DAY, seed=11)
    own_broker = broker is None
    if broker is None:
        state = root / "kafka"
        broker = LocalBroker(_start_broker(state, fresh=True), state)
    postgres = Postgres()
    postgres.start()
    standin = SlackStandin().start()
    built = World(root=root, broker=broker, postgres=postgres, slack=standin, table=table)
    try:
        yield built
    finally:
        built.stop_all()
        standin.stop()
        with contextlib.suppress(RuntimeError):
            postgres.stop()
        if own_broker:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                broker.stop()
