"""`EmrServerlessLauncher`: each run on a dedicated, statically sized EMR Serverless application.

A one-off replay gets its own application (`replay-<run id>`), deleted when the run is released; a
pipeline has one for its whole life (`replay-pipeline-<pipeline id>`, from `pipeline_application` on
its first run), shared by all its runs and deleted only when the pipeline is de-provisioned.
With `emr.warm_applications`, a one-time run of the default size starts on a warm application
instead, started ahead and kept for the next run (`daemon.adapters.emr_warm_pool`, ADR 0050).
At most `emr.max_concurrent_runs` job runs at once (so at most that many one-time applications): the
watcher keeps the rest queued in order, as for the local launcher.

S3 layout (bucket and prefix from `EmrSettings`)::

    <prefix>/artifacts/<sha256[:16]>/main.py, spark_job.zip, venv.tar.gz   (daemon.adapters.packaging)
    <prefix>/runs/<run id>/…   spec (until the run ends), result, logs  (daemon.adapters.emr_run_files)

Applications (found by name, sized, torn down) are `daemon.adapters.emr_applications`; this module
starts, follows and cancels the job runs on them.

Idempotency: a submit retried after a crash finds the run's application and job run by name before
creating anything (its own application first, then the warm ones), and sends client tokens derived
from the run id, so AWS itself refuses to start the same run twice.

Errors: every botocore error passes through `daemon.adapters.aws_errors.aws_errors`, the one place
that maps AWS error codes to the domain errors of `daemon.core.errors`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from daemon.adapters.aws_errors import aws_errors
from daemon.adapters.emr_applications import MANAGED_TAG, EmrApplications, client_token, safe_name
from daemon.adapters.emr_run_files import EmrRunFiles
from daemon.adapters.emr_states import EmrJobRunState, exit_outcome, is_terminal, job_run_state, job_state
from daemon.adapters.emr_warm_pool import EmrWarmPool
from daemon.config.emr_settings import EmrSettings, spark_heap
from daemon.core.errors import BadRequest, ConfigError, NotFound, ReplayError
from daemon.core.retry import poll
from daemon.core.spark_releases import EMR_DELTA_JARS, EMR_ICEBERG_JAR
from daemon.usecases.ports import ApplicationDeleter, Handle, JobOutcome, JobState, Launcher, parse_outcome

log = structlog.get_logger(__name__)

VENV_PYTHON = "./environment/bin/python"  # inside the `#environment` archive Spark unpacks


def spark_submit_parameters(settings: EmrSettings, *, executors: int, py_files: str, venv: str) -> str:
    """The `sparkSubmitParameters`: static executors, no speculation, the job's venv and package, and
    the release's own Iceberg and Delta runtimes on the classpath (the jars its image holds).

    Extra `settings.spark_conf` comes first, so it can never override these; jars it names are kept.
    """
    lake_jars = ",".join((EMR_ICEBERG_JAR, *EMR_DELTA_JARS))
    asked_jars = settings.spark_conf.get("spark.jars")
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
        "spark.jars": f"{asked_jars},{lake_jars}" if asked_jars else lake_jars,
    }
    conf = {**settings.spark_conf, **forced}
    return " ".join([*(f"--conf {key}={value}" for key, value in conf.items()), f"--py-files {py_files}"])


def pipeline_application_name(pipeline_id: str) -> str:
    return f"replay-pipeline-{pipeline_id}"


class EmrServerlessLauncher(Launcher, ApplicationDeleter):
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
            raise ConfigError(f"job artifacts missing {', '.join(missing)}: run `replayd package`")
        venv = settings.venv_uri or artifacts.get("venv")
        if not venv:
            raise ConfigError(
                "no job environment (venv.tar.gz) in S3: "
                "run `replayd package --with-venv` or set emr.venv_uri"
            )
        if poll_interval_s <= 0:
            raise ConfigError("poll_interval_s must be positive")
        self._emr = emr_client
        self._settings = settings
        self.max_concurrent_runs = settings.max_concurrent_runs  # applications at once; the rest queue
        self._applications = EmrApplications(
            emr_client=emr_client,
            settings=settings,
            poll_interval_s=poll_interval_s,
            sleep=sleep,
            monotonic=monotonic,
        )
        self._files = EmrRunFiles(s3_client=s3_client, settings=settings)
        self._pool = EmrWarmPool(  # with none asked for, its keeper only retires those left over
            applications=self._applications,
            count=settings.warm_applications,
            executors=settings.executors_default,
            idle_stop_minutes=settings.warm_idle_stop_minutes,
            monotonic=monotonic,
        )
        self._keeper: threading.Thread | None = None
        self._closing = threading.Event()
        self._entry_point = artifacts["entry_point"]
        self._py_files = artifacts["py_files"]
        self._venv = venv
        self._poll_interval_s = poll_interval_s
        self._sleep = sleep
        self._monotonic = monotonic

    # -- the Launcher interface -------------------------------------------------------------

    def warm(self, workers: int) -> bool | None:
        """With warm applications: whether one was started and idle at the keeper's last pass and
        the run is of their size. Without: None (a one-time run's own application starts cold)."""
        if not self._pool.count:
            return None
        return workers == self._pool.executors and self._pool.ready()

    def keep_warm(self, busy: Callable[[], bool]) -> None:
        """Look after the warm applications every poll interval, in a thread, until `close`."""
        if self._keeper is not None:
            return
        pool = self._pool

        def keep() -> None:
            while not self._closing.is_set():
                try:
                    pool.tick(busy())
                except Exception:  # a store or AWS hiccup: the next pass tries again
                    log.exception("warm applications: a keeper pass failed")
                self._closing.wait(self._poll_interval_s)

        self._keeper = threading.Thread(target=keep, name="emr-warm-applications", daemon=True)
        self._keeper.start()

    def close(self) -> None:
        """Stop looking after the warm applications; they stay, started, for the next daemon (EMR's
        idle timeout stops them if none comes)."""
        self._closing.set()
        if self._keeper is not None:
            self._keeper.join(timeout=30)

    def submit(
        self, run_id: str, spec_json: str, *, workers: int, application_id: str | None = None
    ) -> Handle:
        """Upload the spec, then start the run on its own application (or on `application_id`, a
        pipeline's, from `pipeline_application`). A retry for the same run id re-attaches."""
        if workers < 1:
            raise BadRequest(f"workers must be at least 1, not {workers}")
        spec_uri, result_uri = self._files.put_spec(run_id, spec_json)
        try:
            return self._start(run_id, workers, application_id, spec_uri, result_uri)
        except Exception:  # the run fails to launch and is never released: its spec goes now
            with contextlib.suppress(ReplayError):
                self._files.delete_spec(spec_uri)
            raise

    def _start(
        self, run_id: str, workers: int, application_id: str | None, spec_uri: str, result_uri: str
    ) -> Handle:
        """Find or start the run's job run: on the pipeline's application, on a warm one of the pool,
        or on the run's own application (found or created)."""
        handle: Handle = {
            "kind": self.kind,
            "run_id": run_id,
            "workers": workers,
            "spec_uri": spec_uri,
            "result_uri": result_uri,
            "log_uri": self._files.log_uri(run_id),
        }
        job_name = safe_name(f"replay-{run_id}")
        if application_id is not None:
            warm = self._applications.check_capacity(application_id, workers)
            return self._on(application_id, {**handle, "owns_application": False, "warm": warm}, job_name)
        own = {**handle, "owns_application": True, "warm": False}
        existing = self._applications.find(safe_name(f"replay-{run_id}"))
        if existing is not None:  # a retried submit whose first attempt went cold: never a second job
            return self._on(existing, own, job_name)
        if self._pool.count and workers == self._pool.executors:
            pooled = self._start_on_pool(handle, job_name)
            if pooled is not None:
                return pooled
        # not found above: created now (the token keeps a retry racing this one to one application)
        app_id = self._applications.create(safe_name(f"replay-{run_id}"), workers, token_key=run_id)
        return self._on(app_id, own, job_name)

    def _on(self, app_id: str, handle: Handle, job_name: str) -> Handle:
        """The run's job run on `app_id`: found by name (a retried submit), else started."""
        handle = {**handle, "application_id": app_id}
        job_run_id = self._find_job_run(app_id, job_name)
        if job_run_id is None:
            job_run_id = self._start_job_run(handle, job_name)
            log.info(
                "emr job run started", run_id=handle["run_id"], application_id=app_id, job_run_id=job_run_id
            )
        else:
            log.info(
                "emr job run re-attached",
                run_id=handle["run_id"],
                application_id=app_id,
                job_run_id=job_run_id,
            )
        return {**handle, "job_run_id": job_run_id}

    def _start_on_pool(self, handle: Handle, job_name: str) -> Handle | None:
        """The run on a warm application (re-attached, or started on an idle one); None: start it cold."""
        pooled = {**handle, "owns_application": False, "warm_application": True}
        found = self._pool.find_run(job_name)
        if found is not None:
            log.info("emr job run re-attached", run_id=handle["run_id"], application_id=found[0])
            return {**pooled, "application_id": found[0], "job_run_id": found[1], "warm": True}
        with self._pool.lock:
            taken = self._pool.take()
            if taken is None:
                return None
            app_id = taken
            pooled = {**pooled, "application_id": app_id, "warm": True}
            job_run_id = self._start_job_run(pooled, job_name)
        if self._pool.contested(app_id, job_run_id):
            log.info(
                "emr warm application taken by another run at once; starting cold", application_id=app_id
            )
            self.cancel({"application_id": app_id, "job_run_id": job_run_id})
            return None
        log.info(
            "emr job run started warm", run_id=handle["run_id"], application_id=app_id, job_run_id=job_run_id
        )
        return {**pooled, "job_run_id": job_run_id}

    def state(self, handle: Handle) -> JobState:
        run = self._job_run(handle)
        return JobState.LOST if run is None else job_state(run.get("state"))

    def outcome(self, handle: Handle) -> JobOutcome | None:
        """The result document, else the driver's last result line, else `stateDetails` once it failed."""
        document = self._files.result_document(handle.get("result_uri"))
        if document is not None:
            return document
        run = self._job_run(handle)
        if run is not None and not is_terminal(run.get("state")):
            return None  # a running job writes its result document before it prints the line
        printed = parse_outcome(self._files.driver_log(handle, "stdout"))
        if printed is not None or run is None:
            return printed
        return exit_outcome(run.get("state"), run.get("stateDetails"))

    def log_tail(self, handle: Handle, lines: int = 20) -> list[str]:
        text = self._files.driver_log(handle, "stderr") or self._files.driver_log(handle, "stdout")
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

    def pipeline_application(self, pipeline_id: str, workers: int) -> str:
        """The pipeline's own application, created on its first run and found by name after that
        (resized while stopped when its runs ask for another size); never released with a run."""
        return self.ensure_application(pipeline_application_name(pipeline_id), workers)

    def ensure_application(
        self, name: str, workers: int | None = None, *, token_key: str | None = None
    ) -> str:
        """The id of the live application called `name`, sized for `workers` executors (see
        `EmrApplications.ensure`)."""
        return self._applications.ensure(name, workers, token_key=token_key)

    def release(self, handle: Handle, *, timeout_s: float = 0.0) -> bool:
        """Delete a finished run's spec (it holds the Kafka password), then a one-time run's own
        application; True once both are gone (pipelines keep their application), False while the
        application is still stopping. A refused delete of the spec never holds the application: its
        step is taken, then the refusal is raised (the caller tries again after a pause)."""
        refused: ReplayError | None = None
        if handle.get("spec_uri"):
            try:
                self._files.delete_spec(handle["spec_uri"])
            except ReplayError as exc:  # e.g. the daemon's role lacks s3:DeleteObject
                refused = exc
        done = True
        if handle.get("owns_application") and handle.get("application_id"):
            done = self.delete_application(handle["application_id"], timeout_s=timeout_s)
        if refused is not None:
            raise refused
        return done

    def delete_application(self, app_id: str, *, timeout_s: float = 0.0) -> bool:
        """Stop, then delete; with `timeout_s=0` one step at a time (see `EmrApplications.delete`)."""
        return self._applications.delete(app_id, timeout_s=timeout_s)

    def wait_for_exit(self, handle: Handle, *, timeout_s: float) -> JobState:
        """Poll `state` every `poll_interval_s` until the job exits or `timeout_s` passes (CLI, tests)."""
        last: list[JobState] = []

        def exited() -> JobState | None:
            last.append(self.state(handle))
            return last[-1] if last[-1] in (JobState.EXITED, JobState.LOST) else None

        poll(
            exited,
            every_s=self._poll_interval_s,
            timeout_s=timeout_s,
            clock=self._monotonic,
            sleep=self._sleep,
        )
        return last[-1]

    # -- job runs ----------------------------------------------------------------------------

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
                # another token on a warm application: a run given up there starts again on its own
                clientToken=client_token(
                    "warm-job-run" if handle.get("warm_application") else "job-run", handle["run_id"]
                ),
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

    def _find_job_run(self, app_id: str, name: str) -> str | None:
        named = [run for run in self._applications.job_runs(app_id) if run.get("name") == name]
        return str(named[0]["id"]) if named else None

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
