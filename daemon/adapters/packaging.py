"""Build the job's artifacts and put them in S3 under content-addressed keys.

    <prefix>/artifacts/<sha256[:16]>/main.py         entry point (a copy of spark_job/main.py)
    <prefix>/artifacts/<sha256[:16]>/spark_job.zip   the package, for `--py-files`
    <prefix>/artifacts/<venv key[:16]>/venv.tar.gz   a Python env with the job's third-party imports

The zip is deterministic (sorted entries, fixed timestamps and modes), so unchanged code hashes to
the same key and is uploaded once; an existing key is never written again. pip does not build
byte-identical environments, so the venv is keyed by its *inputs* (requirements, EMR release,
architecture): a daemon finds the environment `replayd package --with-venv` uploaded without
building one. The environment must be built where it will run (Amazon Linux 2023, the release's
Python, the application's architecture): pass that interpreter as `python`.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

import spark_job
from daemon.adapters.aws_errors import aws_errors
from daemon.config.emr_settings import EmrSettings
from daemon.core.errors import ConfigError, NotFound, Unavailable

log = structlog.get_logger(__name__)

PACKAGE_DIR = Path(spark_job.__file__).resolve().parent
ZIP_TIMESTAMP = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can hold: the same bytes on every build
# What the job imports beyond the standard library and pyspark (EMR provides pyspark): the `job` extra
# of pyproject.toml without pyspark, kept in step with it by a test.
JOB_REQUIREMENTS = (
    "boto3>=1.34,<2",
    "confluent-kafka>=2.6,<3",
    "cryptography>=43,<51",
    "numpy>=1.26,<3",
    "pyarrow>=17,<27",
)
PIP_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Artifact:
    """Built files on local disk; `digest` names the code, `venv_key` the environment's inputs."""

    digest: str
    entry_point: Path
    package: Path
    venv: Path | None = None
    venv_key: str | None = None


def venv_key(requirements: Sequence[str], target: str) -> str:
    """The content key of a job environment: what went into it and where it is meant to run."""
    text = json.dumps({"requirements": sorted(requirements), "target": target}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def venv_target(settings: EmrSettings) -> str:
    return f"{settings.release_label}/{settings.architecture}"


def zip_package(package_dir: Path, target: Path) -> None:
    """Zip every `.py` of the package as `spark_job/…`: sorted, fixed times and modes, so reproducible."""
    sources = sorted(p for p in package_dir.rglob("*.py") if "__pycache__" not in p.parts)
    with zipfile.ZipFile(target, "w") as bundle:
        for source in sources:
            info = zipfile.ZipInfo(f"spark_job/{source.relative_to(package_dir).as_posix()}", ZIP_TIMESTAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # unix, whatever builds it
            info.external_attr = 0o644 << 16
            bundle.writestr(info, source.read_bytes(), compresslevel=9)


def build_artifact(
    out_dir: Path,
    *,
    with_venv: bool = False,
    target: str = "",
    python: str = sys.executable,
    requirements: Sequence[str] = JOB_REQUIREMENTS,
    package_dir: Path = PACKAGE_DIR,
) -> Artifact:
    """Zip the package and copy its entry point into `out_dir`; with `with_venv`, build the env too."""
    out_dir.mkdir(parents=True, exist_ok=True)
    package = out_dir / "spark_job.zip"
    zip_package(package_dir, package)
    entry_point = out_dir / "main.py"
    shutil.copyfile(package_dir / "main.py", entry_point)
    digest = hashlib.sha256()
    for path in (entry_point, package):
        digest.update(f"{path.name}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    if not with_venv:
        return Artifact(digest=digest.hexdigest(), entry_point=entry_point, package=package)
    venv = build_venv(out_dir / "venv.tar.gz", python=python, requirements=requirements)
    return Artifact(
        digest=digest.hexdigest(),
        entry_point=entry_point,
        package=package,
        venv=venv,
        venv_key=venv_key(requirements, target),
    )


def build_venv(target: Path, *, python: str, requirements: Sequence[str]) -> Path:
    """`python -m venv` + pip into a temp dir, packed for `spark.archives=…#environment` (needs PyPI)."""
    if _os_id() != "amzn":
        log.warning(
            "building the job environment off Amazon Linux: it runs on EMR Serverless only if this "
            "interpreter's path, version and architecture match the release's",
            python=python,
        )
    with tempfile.TemporaryDirectory(prefix="replay-venv-") as tmp:
        env = Path(tmp) / "environment"
        pip = [str(env / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "--no-input"]
        for command in (
            [python, "-m", "venv", str(env)],
            [*pip, "install", "--no-cache-dir", "--no-compile", *requirements],
        ):
            try:
                subprocess.run(command, check=True, timeout=PIP_TIMEOUT_S)
            except (OSError, subprocess.SubprocessError) as exc:
                raise Unavailable(f"building the job environment failed: {exc}") from exc
        pack_directory(env, target)
    log.info("job environment built", path=str(target), size=target.stat().st_size)
    return target


def pack_directory(source: Path, target: Path) -> None:
    """tar.gz of `source`'s contents (not the directory itself), sorted, owned by root, no bytecode."""
    with (
        target.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed,  # mtime=0: no build time in the bytes
        tarfile.open(fileobj=packed, mode="w") as archive,
    ):
        for path in sorted(source.rglob("*")):
            if "__pycache__" not in path.parts:
                name = path.relative_to(source).as_posix()
                archive.add(path, arcname=name, recursive=False, filter=_owned_by_root)


def _os_id() -> str:
    try:
        return platform.freedesktop_os_release().get("ID", "")
    except OSError:
        return ""


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _exists(s3_client: Any, bucket: str, key: str) -> bool:
    try:
        with aws_errors(f"look up s3://{bucket}/{key}"):
            s3_client.head_object(Bucket=bucket, Key=key)
    except NotFound:
        return False
    return True


def _upload_once(s3_client: Any, bucket: str, key: str, source: Path, *, kms_key_arn: str | None) -> str:
    uri = f"s3://{bucket}/{key}"
    if _exists(s3_client, bucket, key):
        log.info("artifact already uploaded", uri=uri)
        return uri
    extra: dict[str, Any] = {"ServerSideEncryption": "AES256"}
    if kms_key_arn:
        extra = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key_arn}
    with aws_errors(f"upload {uri}"):
        s3_client.upload_file(str(source), bucket, key, ExtraArgs=extra)
    log.info("artifact uploaded", uri=uri)
    return uri


def artifact_prefix(prefix: str, key: str) -> str:
    return "/".join(part for part in (prefix.strip("/"), "artifacts", key[:16]) if part)


def upload_artifact(
    s3_client: Any, bucket: str, prefix: str, artifact: Artifact, *, kms_key_arn: str | None = None
) -> dict[str, str]:
    """Upload what is not there yet; the URIs the launcher needs (`entry_point`, `py_files`, `venv`)."""
    code = artifact_prefix(prefix, artifact.digest)
    uris = {
        "entry_point": _upload_once(
            s3_client, bucket, f"{code}/main.py", artifact.entry_point, kms_key_arn=kms_key_arn
        ),
        "py_files": _upload_once(
            s3_client, bucket, f"{code}/spark_job.zip", artifact.package, kms_key_arn=kms_key_arn
        ),
    }
    if artifact.venv is not None and artifact.venv_key is not None:
        key = f"{artifact_prefix(prefix, artifact.venv_key)}/venv.tar.gz"
        uris["venv"] = _upload_once(s3_client, bucket, key, artifact.venv, kms_key_arn=kms_key_arn)
    return uris


def package_and_upload(
    settings: EmrSettings, s3_client: Any, *, with_venv: bool, python: str = sys.executable
) -> dict[str, str]:
    """Build and upload the job (`replayd package`); the result's URIs are what `EmrServerlessLauncher` takes.

    Without `with_venv` the environment is not built: the one already uploaded for this release and
    architecture is used (or `emr.venv_uri`), and `venv` is absent when there is none.
    """
    if not settings.bucket:
        raise ConfigError("emr.bucket is required to upload the job but not set")
    target = venv_target(settings)
    with tempfile.TemporaryDirectory(prefix="replay-package-") as tmp:
        artifact = build_artifact(Path(tmp), with_venv=with_venv, target=target, python=python)
        uris = upload_artifact(
            s3_client, settings.bucket, settings.prefix, artifact, kms_key_arn=settings.kms_key_arn
        )
    if "venv" not in uris:
        key = f"{artifact_prefix(settings.prefix, venv_key(JOB_REQUIREMENTS, target))}/venv.tar.gz"
        if settings.venv_uri:
            uris["venv"] = settings.venv_uri
        elif _exists(s3_client, settings.bucket, key):
            uris["venv"] = f"s3://{settings.bucket}/{key}"
    return uris
