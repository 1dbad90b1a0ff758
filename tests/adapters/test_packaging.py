"""Job packaging: a reproducible zip, content-addressed uploads to a moto S3 over HTTP.

Building the job environment (`with_venv=True`) needs PyPI and minutes, so it is not run here;
everything after it (keys, skipping what exists, the launcher's URIs) is.
"""

from __future__ import annotations

import io
import json
import shutil
import tomllib
import zipfile
from pathlib import Path

import pytest

from daemon.adapters.packaging import (
    JOB_REQUIREMENTS,
    PACKAGE_DIR,
    Artifact,
    build_artifact,
    package_and_upload,
    upload_artifact,
    venv_key,
    venv_target,
)
from daemon.config.emr_settings import EmrSettings
from daemon.core.errors import ConfigError
from daemon.runtime.server import main as replayd
from tests.fixtures.aws import AwsClients

BUCKET = "replay-artifacts"
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bucket(aws: AwsClients) -> str:
    aws.s3.create_bucket(Bucket=BUCKET)
    aws.s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    return BUCKET


def _settings(aws: AwsClients, **overrides: object) -> EmrSettings:
    return EmrSettings.model_validate({"endpoint_url": aws.endpoint_url, "bucket": BUCKET, **overrides})


def _versions(aws: AwsClients) -> dict[str, int]:
    """How many times each key was written (the bucket is versioned)."""
    counts: dict[str, int] = {}
    for version in aws.s3.list_object_versions(Bucket=BUCKET).get("Versions", []):
        counts[version["Key"]] = counts.get(version["Key"], 0) + 1
    return counts


def test_the_package_zip_is_byte_identical_across_builds(tmp_path: Path) -> None:
    first = build_artifact(tmp_path / "one")
    second = build_artifact(tmp_path / "two")

    assert first.package.read_bytes() == second.package.read_bytes()
    assert first.digest == second.digest


def test_the_zip_holds_the_package_sorted_with_fixed_timestamps(tmp_path: Path) -> None:
    artifact = build_artifact(tmp_path)

    with zipfile.ZipFile(artifact.package) as bundle:
        infos = bundle.infolist()
    names = [info.filename for info in infos]
    expected = sorted(f"spark_job/{p.relative_to(PACKAGE_DIR).as_posix()}" for p in PACKAGE_DIR.rglob("*.py"))
    assert expected == names
    assert {"spark_job/__init__.py", "spark_job/main.py"} <= set(names)
    assert {(1980, 1, 1, 0, 0, 0)} == {info.date_time for info in infos}


def test_the_entry_point_is_a_copy_of_main_py(tmp_path: Path) -> None:
    artifact = build_artifact(tmp_path)

    assert (PACKAGE_DIR / "main.py").read_bytes() == artifact.entry_point.read_bytes()


def test_a_changed_source_changes_the_digest(tmp_path: Path) -> None:
    package = tmp_path / "spark_job"
    shutil.copytree(PACKAGE_DIR, package, ignore=shutil.ignore_patterns("__pycache__"))
    before = build_artifact(tmp_path / "before", package_dir=package).digest
    with (package / "publish" / "pacing.py").open("a") as source:
        source.write("\n# changed\n")

    assert before != build_artifact(tmp_path / "after", package_dir=package).digest


def test_upload_puts_the_files_under_their_content_hash(aws: AwsClients, bucket: str, tmp_path: Path) -> None:
    artifact = build_artifact(tmp_path)

    uris = upload_artifact(aws.s3, bucket, "replay", artifact)

    base = f"s3://{bucket}/replay/artifacts/{artifact.digest[:16]}"
    assert {"entry_point": f"{base}/main.py", "py_files": f"{base}/spark_job.zip"} == uris
    stored = aws.s3.get_object(Bucket=bucket, Key=f"replay/artifacts/{artifact.digest[:16]}/spark_job.zip")
    assert artifact.package.read_bytes() == stored["Body"].read()


def test_upload_skips_files_whose_hash_key_exists(aws: AwsClients, bucket: str, tmp_path: Path) -> None:
    first = upload_artifact(aws.s3, bucket, "replay", build_artifact(tmp_path / "one"))

    again = upload_artifact(aws.s3, bucket, "replay", build_artifact(tmp_path / "two"))

    assert first == again
    written_once = {uri.removeprefix(f"s3://{bucket}/"): 1 for uri in first.values()}
    assert written_once == _versions(aws)


def test_upload_puts_a_venv_under_its_input_key(aws: AwsClients, bucket: str, tmp_path: Path) -> None:
    """A stand-in archive: building a real environment needs PyPI and minutes."""
    code = build_artifact(tmp_path)
    venv = tmp_path / "venv.tar.gz"
    venv.write_bytes(b"not really a tarball")
    key = venv_key(JOB_REQUIREMENTS, "emr-7.5.0/X86_64")
    artifact = Artifact(
        digest=code.digest, entry_point=code.entry_point, package=code.package, venv=venv, venv_key=key
    )

    uris = upload_artifact(aws.s3, bucket, "replay", artifact)

    assert f"s3://{bucket}/replay/artifacts/{key[:16]}/venv.tar.gz" == uris["venv"]


def test_package_and_upload_finds_the_venv_uploaded_earlier(aws: AwsClients, bucket: str) -> None:
    settings = _settings(aws)
    key = f"replay/artifacts/{venv_key(JOB_REQUIREMENTS, venv_target(settings))[:16]}/venv.tar.gz"
    aws.s3.put_object(Bucket=bucket, Key=key, Body=b"env")

    uris = package_and_upload(settings, aws.s3, with_venv=False)

    assert f"s3://{bucket}/{key}" == uris["venv"]
    assert {"entry_point", "py_files", "venv"} == set(uris)


def test_package_and_upload_without_any_venv_leaves_it_out(aws: AwsClients, bucket: str) -> None:
    uris = package_and_upload(_settings(aws), aws.s3, with_venv=False)

    assert {"entry_point", "py_files"} == set(uris)


def test_a_configured_venv_uri_wins(aws: AwsClients, bucket: str) -> None:
    uris = package_and_upload(_settings(aws, venv_uri="s3://elsewhere/env.tar.gz"), aws.s3, with_venv=False)

    assert uris["venv"] == "s3://elsewhere/env.tar.gz"


def test_another_release_needs_another_venv() -> None:
    assert venv_key(JOB_REQUIREMENTS, "emr-7.5.0/X86_64") != venv_key(JOB_REQUIREMENTS, "emr-7.5.0/ARM64")


def test_package_and_upload_needs_a_bucket(aws: AwsClients) -> None:
    with pytest.raises(ConfigError, match=r"emr\.bucket"):
        package_and_upload(EmrSettings(), aws.s3, with_venv=False)


def test_job_requirements_are_the_job_extra_without_pyspark() -> None:
    job = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["job"]

    assert set(JOB_REQUIREMENTS) == {spec for spec in job if not spec.startswith("pyspark")}


def test_replayd_package_uploads_the_job_under_its_content_hash(
    monkeypatch: pytest.MonkeyPatch, aws: AwsClients, bucket: str
) -> None:
    for key, value in {
        "REPLAY_EMR__BUCKET": bucket,
        "REPLAY_EMR__ENDPOINT_URL": aws.endpoint_url,
        "REPLAY_EMR__EXECUTION_ROLE_ARN": "arn:aws:iam::123456789012:role/replay",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(key, value)

    outs = [io.StringIO(), io.StringIO()]
    err = io.StringIO()
    codes = [replayd(["package"], out=out, err=err) for out in outs]

    uris = json.loads(outs[0].getvalue())
    assert codes == [0, 0], err.getvalue()
    assert uris == json.loads(outs[1].getvalue())
    assert uris["entry_point"].startswith(f"s3://{bucket}/replay/artifacts/")
    keys = [o["Key"] for o in aws.s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert sorted(keys) == sorted(u.removeprefix(f"s3://{bucket}/") for u in uris.values())


def test_replayd_package_without_a_bucket_exits_two(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAY_EMR__EXECUTION_ROLE_ARN", "arn:aws:iam::123456789012:role/replay")
    monkeypatch.delenv("REPLAY_EMR__BUCKET", raising=False)
    out, err = io.StringIO(), io.StringIO()

    code = replayd(["package"], out=out, err=err)

    assert code == 2
    assert err.getvalue() == "replayd: emr.bucket is required by the EMR Serverless launcher but not set\n"
    assert out.getvalue() == ""
