"""`EmrServerlessLauncher`: each run on a dedicated, statically sized EMR Serverless application.

S3 layout (bucket and prefix from `EmrSettings`)::

    <prefix>/artifacts/<sha256[:16]>/main.py, spark_job.zip, venv.tar.gz   (daemon.adapters.packaging)
    <prefix>/runs/<run id>/spec.json      argv[1] of the job
    <prefix>/runs/<run id>/result.json    the job's own result document
    <prefix>/runs/<run id>/logs/applications/<app id>/jobs/<job run id>/SPARK_DRIVER/stdout.gz

Static capacity: initial == maximum capacity (one driver + W executors) and dynamic allocation off,
so the job's slot count, and with it the TPS throttle, is exactly what was asked for.

Idempotency: a submit retried after a crash finds the run's application and job run by name before
creating anything, and sends client tokens derived from the run id, so AWS itself refuses to start
the same run twice.

Errors: every botocore error passes through `aws_errors`, the one place that maps AWS error codes
to the domain errors of `daemon.core.errors` (`from exc`, so the AWS response stays in the traceback).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import structlog
from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from daemon.adapters.emr_states import (
    SUBMITTABLE,
    EmrApplicationState,
    EmrJobRunState,
    Teardown,
    application_state,
    exit_outcome,
    is_terminal,
    job_run_state,
    job_state,
    teardown_step,
)
from daemon.config.emr_settings import EmrSettings, spark_heap
from daemon.core.errors import BadRequest, ConfigError, Conflict, NotFound, ReplayError, Unavailable
from daemon.usecases.ports import Handle, JobOutcome, JobState, Launcher, parse_outcome

log = structlog.get_logger(__name__)

LIVE_APPLICATION_STATES = [s.value for s in EmrApplicationState if s is not EmrApplicationState.TERMINATED]
VENV_PYTHON = "./environment/bin/python"  # inside the `#environment` archive Spark unpacks
MANAGED_TAG = "replay:managed"
_NOT_FOUND = {"ResourceNotFoundException", "NoSuchKey", "NotFound", "404"}
_MISCONFIGURED = {"NoSuchBucket"}
_TRANSIENT = {
    "ThrottlingException",
    "Throttling",
    "SlowDown",
    "RequestTimeout",
    "InternalServerException",
    "InternalError",
    "ServiceUnavailable",
    "ServiceQuotaExceededException",
}
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._/#-]")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


@contextmanager
def aws_errors(action: str) -> Iterator[None]:
    """Translate boto errors raised inside the block into domain errors naming `action`."""
    try:
        yield
    except ClientError as exc:
        raise _translate(action, exc) from exc
    except NoCredentialsError as exc:
        raise ConfigError(f"{action}: no AWS credentials found") from exc
    except (BotoCoreError, S3UploadFailedError) as exc:
        raise Unavailable(f"{action}: {exc}") from exc


def _translate(action: str, exc: ClientError) -> ReplayError:
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    text = f"{action} failed: {code or status}: {error.get('Message') or exc}"
    if code in _MISCONFIGURED:
        return ConfigError(text)
    if code in _NOT_FOUND or status == 404:
        return NotFound(text)
    if code == "ConflictException" or status == 409:
        return Conflict(text)
    if code in _TRANSIENT or status == 429 or status >= 500:
        return Unavailable(text)
    return ConfigError(text)  # access denied, validation, bad role: a person must fix the settings


def client_token(kind: str, key: str) -> str:
    """A stable idempotency token: the same run always sends the same token."""
    return hashlib.sha256(f"{kind}:{key}".encode()).hexdigest()[:64]


def safe_name(text: str) -> str:
    """An EMR Serverless application / job run name (64 chars of `[A-Za-z0-9._/#-]`)."""
    return _NAME_UNSAFE.sub("-", text)[:64]


def split_s3(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise BadRequest(f"not an s3:// URI: {uri!r}")
    bucket, _, key = uri[len("s3://") :].partition("/")
    return bucket, key


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


def spark_submit_parameters(settings: EmrSettings, *, executors: int, py_files: str, venv: str) -> str:
    """The `sparkSubmitParameters`: static executors, no speculation, the job's venv and package.

    Extra `settings.spark_conf` comes first, so it can never override these.
    """
    forced = {
        "spark.executor.instances": str(executors),
        "spark.executor.cores": str(settings.executor_cores),
        "spark.executor.memory": spark_heap(settings.executor_memory_gb),
        "spark.driver.cores": str(settings.driver_cores),
        "spark.driver.memory": spark_heap(settings.driver_memory_gb),
        "spark.dynamicAllocation.enabled": "false",
        "spark.speculation": "false",  # a speculative copy would publish a partition twice
        "spark.task.maxFailures": str(settings.task_max_failures),
        "spark.archives": f"{venv}#environment",
        "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON": VENV_PYTHON,
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": VENV_PYTHON,
        "spark.executorEnv.PYSPARK_PYTHON": VENV_PYTHON,
    }
    conf = {**settings.spark_conf, **forced}
    return " ".join([*(f"--conf {key}={value}" for key, value in conf.items()), f"--py-files {py_files}"])


def _sizes(initial: Any, maximum: Any) -> tuple[float, ...]:
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


def _gunzip(body: bytes) -> bytes:
    """Every gzip member of `body`, as far as it is complete (a log may be cut mid-upload)."""
    out, rest = [], body
    try:
        while rest:
            member = zlib.decompressobj(wbits=31)
            out.append(member.decompress(rest))
            rest = member.unused_data
    except zlib.error:
        return b"".join(out) if out else body  # not gzip at all: read it as plain text
    return b"".join(out)


class EmrServerlessLauncher(Launcher):
    """Runs `spark_job/main.py` as EMR Serverless job runs; handles are plain dicts of ids and URIs."""

    kind = "emr"

    def __init__(
        self,
        *,
        emr_client: Any,
        s3_client: Any,
        settings: EmrSettings,
        artifacts: Mapping[str, str],
        poll_interval_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        settings.require_launch()
        missing = [key for key in ("entry_point", "py_files") if not artifacts.get(key)]
        if missing:
            raise ConfigError(f"job artifacts missing {', '.join(missing)}: run `replay package`")
        venv = settings.venv_uri or artifacts.get("venv")
        if not venv:
            raise ConfigError(
                "no job environment (venv.tar.gz) in S3: run `replay package --with-venv` or set emr.venv_uri"
            )
        if poll_interval_s <= 0:
            raise ConfigError("poll_interval_s must be positive")
        self._emr = emr_client
        self._s3 = s3_client
        self._settings = settings
        self._entry_point = artifacts["entry_point"]
        self._py_files = artifacts["py_files"]
        self._venv = venv
        self._poll_interval_s = poll_interval_s
        self._sleep = sleep
        self._monotonic = monotonic

    # -- the Launcher interface -------------------------------------------------------------

    def submit(
        self, run_id: str, spec_json: str, *, workers: int, application_id: str | None = None
    ) -> Handle:
        """Upload the spec, then start the run on its own application (or on `application_id`, a
        pipeline's, from `ensure_application`). A retry for the same run id re-attaches."""
        if workers < 1:
            raise BadRequest(f"workers must be at least 1, not {workers}")
        spec_uri = self._settings.s3_uri("runs", run_id, "spec.json")
        spec_text, result_uri = self._with_result_uri(
            spec_json, self._settings.s3_uri("runs", run_id, "result.json")
        )
        self._put_text(spec_uri, spec_text)
        if application_id is None:
            app_id = self.ensure_application(f"replay-{run_id}", workers, token_key=run_id)
        else:
            app_id = application_id
            self._check_capacity(app_id, workers)
        handle: Handle = {
            "kind": self.kind,
            "run_id": run_id,
            "application_id": app_id,
            "owns_application": application_id is None,
            "workers": workers,
            "spec_uri": spec_uri,
            "result_uri": result_uri,
            "log_uri": self._settings.s3_uri("runs", run_id, "logs") + "/",
        }
        job_name = safe_name(f"replay-{run_id}")
        job_run_id = self._find_job_run(app_id, job_name)
        if job_run_id is None:
            job_run_id = self._start_job_run(handle, job_name)
            log.info("emr job run started", run_id=run_id, application_id=app_id, job_run_id=job_run_id)
        else:
            log.info("emr job run re-attached", run_id=run_id, application_id=app_id, job_run_id=job_run_id)
        return {**handle, "job_run_id": job_run_id}

    def state(self, handle: Handle) -> JobState:
        run = self._job_run(handle)
        return JobState.LOST if run is None else job_state(run.get("state"))

    def outcome(self, handle: Handle) -> JobOutcome | None:
        """The result document, else the driver's last result line, else `stateDetails` once it failed."""
        document = self._result_document(handle.get("result_uri"))
        if document is not None:
            return document
        run = self._job_run(handle)
        if run is not None and not is_terminal(run.get("state")):
            return None  # a running job writes its result document before it prints the line
        printed = parse_outcome(self._driver_log(handle, "stdout"))
        if printed is not None or run is None:
            return printed
        return exit_outcome(run.get("state"), run.get("stateDetails"))

    def log_tail(self, handle: Handle, lines: int = 20) -> list[str]:
        text = self._driver_log(handle, "stderr") or self._driver_log(handle, "stdout")
        return text[-lines:] if lines > 0 else []

    def cancel(self, handle: Handle) -> None:
        run = self._job_run(handle)
        if (
            run is None
            or job_run_state(run.get("state")) is EmrJobRunState.CANCELLING
            or is_terminal(run["state"])
        ):
            return
        try:
            with aws_errors("cancel EMR Serverless job run"):
                self._emr.cancel_job_run(
                    applicationId=handle["application_id"], jobRunId=handle["job_run_id"]
                )
        except NotFound:
            return
        except ConfigError:  # refused: it may have ended between the two calls
            again = self._job_run(handle)
            if again is None or is_terminal(again.get("state")):
                return
            raise
        log.info("emr job run cancelled", run_id=handle.get("run_id"), job_run_id=handle["job_run_id"])

    # -- applications: one per one-time run, one per pipeline --------------------------------

    def ensure_application(
        self, name: str, workers: int | None = None, *, token_key: str | None = None
    ) -> str:
        """The id of the live application called `name`, sized for `workers` executors, created if needed.

        `token_key` makes creation idempotent on AWS's side too (a run id); pipelines, whose
        application may be deleted and created again under the same name, rely on the name alone.
        """
        executors = workers or self._settings.executors_default
        name = safe_name(name)
        app_id = self._find_application(name)
        if app_id is None:
            return self._create_application(name, executors, token_key)
        app = self._application(app_id)
        state = application_state(app.get("state"))
        if state not in SUBMITTABLE:
            raise Unavailable(f"EMR Serverless application {name} ({app_id}) is {state}; try again shortly")
        initial, maximum = application_capacity(self._settings, executors)
        if _sizes(app.get("initialCapacity"), app.get("maximumCapacity")) == _sizes(initial, maximum):
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

    def release(self, handle: Handle, *, timeout_s: float = 0.0) -> bool:
        """Delete a finished one-time run's own application; True once it is gone (pipelines keep theirs)."""
        if not handle.get("owns_application") or not handle.get("application_id"):
            return True
        return self.delete_application(handle["application_id"], timeout_s=timeout_s)

    def delete_application(self, app_id: str, *, timeout_s: float = 0.0) -> bool:
        """Stop, then delete; True once the application is gone or its deletion was accepted.

        An application must be stopped before it can be deleted, which takes a while: with the
        default `timeout_s=0` this takes one step and returns False when it must be called again;
        with a timeout it polls every `poll_interval_s` until done or out of time.
        """
        deadline = self._monotonic() + timeout_s
        while not self._teardown(app_id):
            if self._monotonic() + self._poll_interval_s > deadline:
                return False
            self._sleep(self._poll_interval_s)
        return True

    def wait_for_exit(self, handle: Handle, *, timeout_s: float) -> JobState:
        """Poll `state` every `poll_interval_s` until the job exits or `timeout_s` passes (CLI, tests)."""
        deadline = self._monotonic() + timeout_s
        while True:
            state = self.state(handle)
            if (
                state in (JobState.EXITED, JobState.LOST)
                or self._monotonic() + self._poll_interval_s > deadline
            ):
                return state
            self._sleep(self._poll_interval_s)

    # -- AWS calls ---------------------------------------------------------------------------

    def _teardown(self, app_id: str) -> bool:
        """One step towards deletion, chosen by the application's state; True once it is gone."""
        try:
            step = teardown_step(self._application(app_id).get("state"))
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

    def _create_application(self, name: str, executors: int, token_key: str | None) -> str:
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
            "autoStopConfiguration": {"enabled": True, "idleTimeoutMinutes": settings.idle_stop_minutes},
            "tags": {MANAGED_TAG: "true"},
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

    def _start_job_run(self, handle: Handle, job_name: str) -> str:
        settings = self._settings
        logs: dict[str, str] = {"logUri": handle["log_uri"]}
        if settings.kms_key_arn:
            logs["encryptionKeyArn"] = settings.kms_key_arn
        parameters = spark_submit_parameters(
            settings, executors=handle["workers"], py_files=self._py_files, venv=self._venv
        )
        with aws_errors("start EMR Serverless job run"):
            response = self._emr.start_job_run(
                applicationId=handle["application_id"],
                clientToken=client_token("job-run", handle["run_id"]),
                name=job_name,
                executionRoleArn=settings.execution_role_arn,
                jobDriver={
                    "sparkSubmit": {
                        "entryPoint": self._entry_point,
                        "entryPointArguments": [handle["spec_uri"]],
                        "sparkSubmitParameters": parameters,
                    }
                },
                configurationOverrides={"monitoringConfiguration": {"s3MonitoringConfiguration": logs}},
                executionTimeoutMinutes=settings.execution_timeout_minutes,
                tags={MANAGED_TAG: "true", "replay:run-id": safe_name(handle["run_id"])},
            )
        return str(response["jobRunId"])

    def _find_application(self, name: str) -> str | None:
        with aws_errors("list EMR Serverless applications"):
            pages = self._emr.get_paginator("list_applications").paginate(states=LIVE_APPLICATION_STATES)
            named = [app for page in pages for app in page.get("applications", []) if app.get("name") == name]
        named.sort(key=lambda app: (str(app.get("createdAt", "")), app["id"]))  # a lost race: use the first
        return str(named[0]["id"]) if named else None

    def _find_job_run(self, app_id: str, name: str) -> str | None:
        try:
            with aws_errors("list EMR Serverless job runs"):
                pages = self._emr.get_paginator("list_job_runs").paginate(applicationId=app_id)
                named = [run for page in pages for run in page.get("jobRuns", []) if run.get("name") == name]
        except NotFound:  # moto answers this for an application with no job runs yet
            return None
        named.sort(key=lambda run: (str(run.get("createdAt", "")), run["id"]))
        return str(named[0]["id"]) if named else None

    def _application(self, app_id: str) -> dict[str, Any]:
        with aws_errors("get EMR Serverless application"):
            return dict(self._emr.get_application(applicationId=app_id)["application"])

    def _check_capacity(self, app_id: str, workers: int) -> None:
        app = self._application(app_id)
        executors = int(app.get("initialCapacity", {}).get("EXECUTOR", {}).get("workerCount", 0))
        if workers > executors:
            raise ConfigError(
                f"EMR Serverless application {app_id} has {executors} executors; the run asks for {workers}"
            )

    def _job_run(self, handle: Handle) -> dict[str, Any] | None:
        if not handle.get("application_id") or not handle.get("job_run_id"):
            return None
        try:
            with aws_errors("get EMR Serverless job run"):
                response = self._emr.get_job_run(
                    applicationId=handle["application_id"], jobRunId=handle["job_run_id"]
                )
        except NotFound:
            return None
        return dict(response["jobRun"])

    def _driver_log(self, handle: Handle, stream: str) -> list[str]:
        """Lines of the driver's `stdout`/`stderr` as EMR Serverless publishes them to the run's log URI."""
        if not handle.get("log_uri") or not handle.get("job_run_id"):
            return []
        uri = (
            f"{handle['log_uri'].rstrip('/')}/applications/{handle['application_id']}"
            f"/jobs/{handle['job_run_id']}/SPARK_DRIVER/{stream}.gz"
        )
        body = self._get_bytes(uri)
        return [] if body is None else _gunzip(body).decode("utf-8", errors="replace").splitlines()

    def _result_document(self, uri: str | None) -> JobOutcome | None:
        body = self._get_bytes(uri) if uri else None
        if body is None:
            return None
        try:
            document = json.loads(body)
        except ValueError:
            return None  # not (yet) a whole document: the stdout line decides
        if not isinstance(document, dict) or document.get("status") not in ("succeeded", "failed"):
            return None
        return JobOutcome(succeeded=document["status"] == "succeeded", payload=document)

    def _get_bytes(self, uri: str) -> bytes | None:
        bucket, key = split_s3(uri)
        try:
            with aws_errors(f"read {uri}"):
                return bytes(self._s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        except NotFound:
            return None

    def _put_text(self, uri: str, text: str) -> None:
        bucket, key = split_s3(uri)
        encryption: dict[str, str] = {"ServerSideEncryption": "AES256"}
        if self._settings.kms_key_arn:  # the spec carries Kafka credentials
            encryption = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self._settings.kms_key_arn}
        with aws_errors(f"write {uri}"):
            self._s3.put_object(
                Bucket=bucket, Key=key, Body=text.encode(), ContentType="application/json", **encryption
            )

    @staticmethod
    def _with_result_uri(spec_json: str, default: str) -> tuple[str, str]:
        """The spec with an S3 `result_uri`: a daemon-local path means nothing to a job on EMR."""
        try:
            spec = json.loads(spec_json)
        except ValueError as exc:
            raise BadRequest(f"the job spec is not JSON: {exc}") from None
        if not isinstance(spec, dict):
            raise BadRequest("the job spec must be a JSON object")
        current = spec.get("result_uri")
        if isinstance(current, str) and current.startswith("s3://"):
            return spec_json, current
        return json.dumps({**spec, "result_uri": default}, indent=2), default
