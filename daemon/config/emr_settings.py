"""`EmrSettings`: what the EMR Serverless launcher and the job packager need, as one plain model.

The main `Settings` mounts it as `settings.emr`; it is an ordinary pydantic model, so it is built
from a dict (`EmrSettings.model_validate({...})`) in tests and by the settings loader alike.
Worker sizes are checked against the CPU/memory pairs EMR Serverless accepts, so a bad size fails
at start-up instead of at the first launch.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from daemon.core.errors import ConfigError
from daemon.core.spark_releases import DEFAULT_RELEASE

# vCPU -> (min GB, max GB, step GB): the worker sizes EMR Serverless accepts.
WORKER_SIZES: dict[int, tuple[int, int, int]] = {
    1: (2, 8, 1),
    2: (4, 16, 1),
    4: (8, 30, 1),
    8: (16, 60, 4),
    16: (32, 120, 8),
}
_RELEASE_LABEL = re.compile(r"emr-(spark-)?\d+\.\d+\.\d+")
_OVERHEAD = 1.1  # Spark asks for heap + 10% overhead (at least 384 MiB) per worker
_MIN_OVERHEAD_MB = 384
_HEAP_STEP_MB = 256


def _check_worker(role: str, cores: int, memory_gb: int) -> None:
    if cores not in WORKER_SIZES:
        raise ValueError(f"{role}_cores must be one of {sorted(WORKER_SIZES)}, not {cores}")
    low, high, step = WORKER_SIZES[cores]
    if not low <= memory_gb <= high or memory_gb % step:
        raise ValueError(
            f"{role}_memory_gb={memory_gb} does not fit a {cores}-vCPU worker "
            f"({low}-{high} GB in steps of {step} GB)"
        )


def spark_heap(worker_memory_gb: int) -> str:
    """The Spark heap (`spark.*.memory`) that, with Spark's overhead, fits in a worker of this size.

    A pre-initialized worker is used only if the job asks for no more than it has, so the heap is
    the worker's memory less the overhead, rounded down to 256 MiB.
    """
    worker_mb = worker_memory_gb * 1024
    heap_mb = min(int(worker_mb / _OVERHEAD), worker_mb - _MIN_OVERHEAD_MB)
    return f"{heap_mb - heap_mb % _HEAP_STEP_MB}m"


class EmrSettings(BaseModel):
    """EMR Serverless: application size, where artifacts, specs and logs live, and who runs the job."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    region: str = Field(default="us-east-1", description="the AWS region of EMR Serverless, S3 and KMS")
    endpoint_url: str | None = Field(default=None, description="AWS endpoint override (tests: moto)")
    # Spark 4.0 with Python 3.11: what the job is written for (emr-7.x ships Spark 3.5 and Python 3.9).
    release_label: str = Field(default=DEFAULT_RELEASE, description="the EMR release the job runs on")
    architecture: Literal["X86_64", "ARM64"] = Field(default="X86_64", description="the workers' CPU")
    execution_role_arn: str | None = Field(
        default=None, description="the IAM role job runs assume (required with the EMR launcher)"
    )
    bucket: str | None = Field(default=None, description="holds artifacts, run specs, results and logs")
    prefix: str = Field(default="replay", description="the key prefix of everything in the bucket")
    kms_key_arn: str | None = Field(
        default=None, description="SSE-KMS for specs (they carry Kafka creds) and logs"
    )
    venv_uri: str | None = Field(default=None, description="a job environment built elsewhere (s3://…tar.gz)")
    subnet_ids: tuple[str, ...] = Field(default=(), description="VPC subnets, to reach private brokers")
    security_group_ids: tuple[str, ...] = Field(default=(), description="security groups with the subnets")
    spark_conf: dict[str, str] = Field(
        default_factory=dict,
        description="extra --conf (e.g. the Glue catalog); cannot undo the static sizing",
    )

    driver_cores: int = Field(default=4, description="vCPUs of the driver worker (1, 2, 4, 8 or 16)")
    driver_memory_gb: int = Field(
        default=16, description="memory of the driver worker, within its vCPUs' range"
    )
    executor_cores: int = Field(default=4, description="vCPUs of each executor worker (1, 2, 4, 8 or 16)")
    executor_memory_gb: int = Field(default=16, description="memory of each executor worker")
    executors_default: int = Field(default=2, ge=1, description="executors when a request names no workers")
    idle_stop_minutes: int = Field(
        default=15,
        ge=1,
        le=10_080,
        description="an application releases its workers after this long idle (a pipeline's, between runs)",
    )
    task_max_failures: int = Field(default=3, ge=1, description="spark.task.maxFailures of the job")
    execution_timeout_minutes: int = Field(
        default=720, ge=5, description="EMR kills a job run after this; a longer plan is refused (422)"
    )
    max_concurrent_runs: int = Field(
        default=4,
        ge=1,
        description="job runs at once (each one-time run on its own application), the rest wait in line; "
        "keep it plus warm_applications, x (driver + executors) x cores, under the account's EMR "
        "Serverless vCPU quota",
    )

    warm_applications: int = Field(
        default=0,
        ge=0,
        description="applications kept started, their capacity pre-initialized, for one-time runs of "
        "executors_default executors to start on at once (each costs one job's capacity while started; "
        "at most max_concurrent_runs)",
    )

    warm_idle_stop_minutes: int = Field(
        default=240,
        ge=1,
        le=10_080,
        description="a warm application idle this long is stopped by EMR (the keeper starts it again): "
        "the bound on what an idle warm application costs once no daemon keeps it",
    )

    @field_validator("release_label")
    @classmethod
    def _release_label(cls, value: str) -> str:
        if not _RELEASE_LABEL.fullmatch(value):
            raise ValueError(f"release_label must look like 'emr-spark-8.0.0', not {value!r}")
        return value

    @field_validator("spark_conf")
    @classmethod
    def _spark_conf(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if not key.startswith("spark.") or any(text.split() != [text] for text in (key, item)):
                raise ValueError(f"spark_conf {key!r}: keys start with 'spark.', neither may hold whitespace")
        return value

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        return value.strip("/")

    @model_validator(mode="after")
    def _worker_sizes(self) -> EmrSettings:
        _check_worker("driver", self.driver_cores, self.driver_memory_gb)
        _check_worker("executor", self.executor_cores, self.executor_memory_gb)
        return self

    @model_validator(mode="after")
    def _warm_within_admission(self) -> EmrSettings:
        if self.warm_applications > self.max_concurrent_runs:
            raise ValueError(
                f"warm_applications={self.warm_applications} is more than max_concurrent_runs="
                f"{self.max_concurrent_runs}: a warm application is kept for a run that could start"
            )
        return self

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `boto3.client(...)` so every client talks to the same region/endpoint."""
        kwargs: dict[str, Any] = {"region_name": self.region}
        if self.endpoint_url:
            kwargs["endpoint_url"] = self.endpoint_url
        return kwargs

    def require_launch(self) -> None:
        """Fail early, naming the setting, when the launcher lacks what every job run needs."""
        for name in ("execution_role_arn", "bucket"):
            if not getattr(self, name):
                raise ConfigError(f"emr.{name} is required by the EMR Serverless launcher but not set")

    def s3_uri(self, *parts: str) -> str:
        """`s3://<bucket>/<prefix>/<parts…>`."""
        if not self.bucket:
            raise ConfigError("emr.bucket is required but not set")
        key = "/".join(part.strip("/") for part in (self.prefix, *parts) if part.strip("/"))
        return f"s3://{self.bucket}/{key}"
