"""`EmrApplications`: statically sized EMR Serverless applications, found by name, created, torn down.

Static capacity: initial == maximum capacity (one driver + W executors) and dynamic allocation off,
so a job's slot count, and with it the TPS throttle, is exactly what was asked for. A one-time run
gets its own application (named after the run); a pipeline keeps one for its whole life.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from collections.abc import Callable
from typing import Any

import structlog

from daemon.adapters.aws_errors import aws_errors
from daemon.adapters.emr_states import (
    SUBMITTABLE,
    TERMINAL_JOB_RUN_STATES,
    EmrApplicationState,
    EmrJobRunState,
    Teardown,
    application_state,
    teardown_step,
)
from daemon.config.emr_settings import EmrSettings
from daemon.core.errors import ConfigError, NotFound, Unavailable
from daemon.core.retry import poll

log = structlog.get_logger(__name__)

LIVE_APPLICATION_STATES = [s.value for s in EmrApplicationState if s is not EmrApplicationState.TERMINATED]
ACTIVE_JOB_RUN_STATES = [s.value for s in EmrJobRunState if s not in TERMINAL_JOB_RUN_STATES]
MANAGED_TAG = "replay:managed"
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._/#-]")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def client_token(kind: str, key: str) -> str:
    """A stable idempotency token: the same run always sends the same token."""
    return hashlib.sha256(f"{kind}:{key}".encode()).hexdigest()[:64]


def safe_name(text: str) -> str:
    """An EMR Serverless application / job run name (64 chars of `[A-Za-z0-9._/#-]`)."""
    return _NAME_UNSAFE.sub("-", text)[:64]


def application_capacity(settings: EmrSettings, executors: int) -> tuple[dict[str, Any], dict[str, str]]:
    """`initialCapacity` == `maximumCapacity`: one driver and `executors` executors, no autoscaling."""

    def worker(count: int, cores: int, memory_gb: int) -> dict[str, Any]:
        return {
            "workerCount": count,
            "workerConfiguration": {"cpu": f"{cores} vCPU", "memory": f"{memory_gb} GB"},
        }

    initial = {
        "DRIVER": worker(1, settings.driver_cores, settings.driver_memory_gb),
        "EXECUTOR": worker(executors, settings.executor_cores, settings.executor_memory_gb),
    }
    cpu = settings.driver_cores + executors * settings.executor_cores
    memory = settings.driver_memory_gb + executors * settings.executor_memory_gb
    return initial, {"cpu": f"{cpu} vCPU", "memory": f"{memory} GB"}


def capacity_sizes(initial: Any, maximum: Any) -> tuple[float, ...]:
    """The numbers in a capacity, so AWS's spelling of it ("4vCPU", an added default disk) does not matter."""

    def number(text: object) -> float:
        found = _NUMBER.search(str(text or ""))
        value = float(found.group()) if found else 0.0
        return value / 1024 if "MB" in str(text).upper() else value

    workers = initial or {}
    sizes = []
    for role in ("DRIVER", "EXECUTOR"):
        worker = workers.get(role, {})
        config = worker.get("workerConfiguration", {})
        sizes += [number(worker.get("workerCount")), number(config.get("cpu")), number(config.get("memory"))]
    return (*sizes, number((maximum or {}).get("cpu")), number((maximum or {}).get("memory")))


class EmrApplications:
    """Find, create, resize, check and delete applications; every AWS call goes through `aws_errors`."""

    def __init__(
        self,
        *,
        emr_client: Any,
        settings: EmrSettings,
        poll_interval_s: float,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._emr = emr_client
        self._settings = settings
        self._poll_interval_s = poll_interval_s
        self._sleep = sleep
        self._monotonic = monotonic

    def ensure(self, name: str, workers: int | None = None, *, token_key: str | None = None) -> str:
        """The id of the live application called `name`, sized for `workers` executors, created if needed.

        `token_key` makes creation idempotent on AWS's side too (a run id); pipelines, whose
        application may be deleted and created again under the same name, rely on the name alone.
        """
        executors = workers or self._settings.executors_default
        name = safe_name(name)
        app_id = self.find(name)
        if app_id is None:
            return self.create(name, executors, token_key=token_key)
        app = self.describe(app_id)
        state = application_state(app.get("state"))
        if state not in SUBMITTABLE:
            raise Unavailable(f"EMR Serverless application {name} ({app_id}) is {state}; try again shortly")
        initial, maximum = application_capacity(self._settings, executors)
        if capacity_sizes(app.get("initialCapacity"), app.get("maximumCapacity")) == capacity_sizes(
            initial, maximum
        ):
            return app_id
        if state not in (EmrApplicationState.CREATED, EmrApplicationState.STOPPED):
            raise Unavailable(
                f"EMR Serverless application {name} is {state} with another size; resize it once stopped"
            )
        with aws_errors("resize EMR Serverless application"):
            self._emr.update_application(
                applicationId=app_id, initialCapacity=initial, maximumCapacity=maximum
            )
        log.info("emr application resized", application_id=app_id, executors=executors)
        return app_id

    def check_capacity(self, app_id: str, workers: int) -> bool:
        """A run on an existing (pipeline) application may not ask for more executors than it has;
        True when the application is started (its capacity up: the run starts warm)."""
        app = self.describe(app_id)
        executors = int(app.get("initialCapacity", {}).get("EXECUTOR", {}).get("workerCount", 0))
        if workers > executors:
            raise ConfigError(
                f"EMR Serverless application {app_id} has {executors} executors; the run asks for {workers}"
            )
        return application_state(app.get("state")) is EmrApplicationState.STARTED

    def delete(self, app_id: str, *, timeout_s: float = 0.0) -> bool:
        """Stop, then delete; True once the application is gone or its deletion was accepted.

        An application must be stopped before it can be deleted, which takes a while: with the
        default `timeout_s=0` this takes one step and returns False when it must be called again;
        with a timeout it polls every `poll_interval_s` until done or out of time.
        """
        gone = poll(
            lambda: True if self._teardown(app_id) else None,
            every_s=self._poll_interval_s,
            timeout_s=timeout_s,
            clock=self._monotonic,
            sleep=self._sleep,
        )
        return gone is not None

    def describe(self, app_id: str) -> dict[str, Any]:
        with aws_errors("get EMR Serverless application"):
            return dict(self._emr.get_application(applicationId=app_id)["application"])

    def _teardown(self, app_id: str) -> bool:
        """One step towards deletion, chosen by the application's state; True once it is gone."""
        try:
            step = teardown_step(self.describe(app_id).get("state"))
            if step is Teardown.STOP:
                with aws_errors("stop EMR Serverless application"):
                    self._emr.stop_application(applicationId=app_id)
            elif step is Teardown.DELETE:
                with aws_errors("delete EMR Serverless application"):
                    self._emr.delete_application(applicationId=app_id)
                log.info("emr application deleted", application_id=app_id)
        except NotFound:
            return True
        return step in (Teardown.DELETE, Teardown.GONE)

    def start(self, app_id: str) -> None:
        """Ask EMR to start the application, provisioning its initial capacity (it may still fail)."""
        with aws_errors("start EMR Serverless application"):
            self._emr.start_application(applicationId=app_id)
        log.info("emr application starting", application_id=app_id)

    def create(
        self,
        name: str,
        executors: int,
        *,
        token_key: str | None = None,
        tags: dict[str, str] | None = None,
        idle_stop_minutes: int | None = None,
    ) -> str:
        """A new application called `name` (see `ensure`, which finds one first)."""
        settings = self._settings
        initial, maximum = application_capacity(settings, executors)
        request: dict[str, Any] = {
            "name": name,
            "releaseLabel": settings.release_label,
            "type": "SPARK",
            "architecture": settings.architecture,
            "clientToken": client_token("application", token_key) if token_key else secrets.token_hex(16),
            "initialCapacity": initial,
            "maximumCapacity": maximum,
            "autoStartConfiguration": {"enabled": True},
            "autoStopConfiguration": {
                "enabled": True,
                "idleTimeoutMinutes": idle_stop_minutes or settings.idle_stop_minutes,
            },
            "tags": {MANAGED_TAG: "true", **(tags or {})},
        }
        if settings.subnet_ids:
            request["networkConfiguration"] = {
                "subnetIds": list(settings.subnet_ids),
                "securityGroupIds": list(settings.security_group_ids),
            }
        with aws_errors("create EMR Serverless application"):
            app_id = str(self._emr.create_application(**request)["applicationId"])
        log.info("emr application created", application_id=app_id, name=name, executors=executors)
        return app_id

    def find(self, name: str) -> str | None:
        """The live application called `name` (the oldest, should a race have made two), or None."""
        return self.named(name).get(name)

    def named(self, prefix: str) -> dict[str, str]:
        """Live applications whose names start with `prefix`: name -> id, the oldest of each name."""
        found: dict[str, str] = {}
        for name, app_id in self.all_named(prefix):
            found.setdefault(name, app_id)
        return found

    def all_named(self, prefix: str) -> list[tuple[str, str]]:
        """Every live application whose name starts with `prefix`, oldest first (a lost race of two
        creations leaves two of one name: the first is the one used)."""
        with aws_errors("list EMR Serverless applications"):
            pages = self._emr.get_paginator("list_applications").paginate(states=LIVE_APPLICATION_STATES)
            apps = [app for page in pages for app in page.get("applications", [])]
        apps.sort(key=lambda app: (str(app.get("createdAt", "")), app["id"]))
        return [
            (str(app.get("name", "")), str(app["id"]))
            for app in apps
            if str(app.get("name", "")).startswith(prefix)
        ]

    def job_runs(self, app_id: str, *, active: bool = False) -> list[dict[str, Any]]:
        """The application's job runs EMR still lists (only those not ended, when `active`), oldest first."""
        states = {"states": ACTIVE_JOB_RUN_STATES} if active else {}
        try:
            with aws_errors("list EMR Serverless job runs"):
                pages = self._emr.get_paginator("list_job_runs").paginate(applicationId=app_id, **states)
                runs = [run for page in pages for run in page.get("jobRuns", [])]
        except NotFound:  # moto answers this for an application with no job runs yet
            return []
        return sorted(runs, key=lambda run: (str(run.get("createdAt", "")), str(run.get("id", ""))))

    def matches(self, app: dict[str, Any], executors: int) -> bool:
        """Whether an application is what these settings would create for `executors` executors now
        (its size and release), so a kept one made under older settings is not used."""
        initial, maximum = application_capacity(self._settings, executors)
        sized = capacity_sizes(app.get("initialCapacity"), app.get("maximumCapacity")) == capacity_sizes(
            initial, maximum
        )
        return sized and app.get("releaseLabel") == self._settings.release_label
