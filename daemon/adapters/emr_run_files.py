"""`EmrRunFiles`: what a run on EMR Serverless leaves in S3, written and read back.

    <prefix>/runs/<run id>/spec.json      argv[1] of the job (written here, before the job starts;
                                          deleted once the run has ended: it holds the Kafka password)
    <prefix>/runs/<run id>/result.json    the job's own result document
    <prefix>/runs/<run id>/logs/applications/<app id>/jobs/<job run id>/SPARK_DRIVER/stdout.gz

The job's outcome is read from these: its result document, else the result line in the driver's
stdout. Only the daemon's edge checks that a URI is an `s3://` one; `spark_job.uris.split_s3`
takes it apart.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from daemon.adapters.aws_errors import aws_errors
from daemon.config.emr_settings import EmrSettings
from daemon.core.errors import BadRequest, NotFound
from daemon.usecases.ports import Handle, JobOutcome
from spark_job.uris import split_s3


def s3_location(uri: str) -> tuple[str, str]:
    """(bucket, key) of an `s3://` URI; anything else is refused."""
    if not uri.startswith("s3://"):
        raise BadRequest(f"not an s3:// URI: {uri!r}")
    return split_s3(uri)


def gunzip(body: bytes) -> bytes:
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


def with_result_uri(spec_json: str, default: str) -> tuple[str, str]:
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


class EmrRunFiles:
    """The spec, result document and driver logs of runs, under the settings' bucket and prefix."""

    def __init__(self, *, s3_client: Any, settings: EmrSettings) -> None:
        self._s3 = s3_client
        self._settings = settings

    def put_spec(self, run_id: str, spec_json: str) -> tuple[str, str]:
        """Upload the run's spec (with an S3 `result_uri`); returns (spec URI, result URI)."""
        spec_uri = self._settings.s3_uri("runs", run_id, "spec.json")
        spec_text, result_uri = with_result_uri(
            spec_json, self._settings.s3_uri("runs", run_id, "result.json")
        )
        self._put_text(spec_uri, spec_text)
        return spec_uri, result_uri

    def delete_spec(self, spec_uri: str) -> None:
        """Delete a finished run's spec; one already gone is not an error (S3 answers 204 either way)."""
        bucket, key = s3_location(spec_uri)
        with aws_errors(f"delete {spec_uri}"):
            self._s3.delete_object(Bucket=bucket, Key=key)

    def log_uri(self, run_id: str) -> str:
        return self._settings.s3_uri("runs", run_id, "logs") + "/"

    def driver_log(self, handle: Handle, stream: str) -> list[str]:
        """Lines of the driver's `stdout`/`stderr` as EMR Serverless publishes them to the run's log URI."""
        if not handle.get("log_uri") or not handle.get("job_run_id"):
            return []
        uri = (
            f"{handle['log_uri'].rstrip('/')}/applications/{handle['application_id']}"
            f"/jobs/{handle['job_run_id']}/SPARK_DRIVER/{stream}.gz"
        )
        body = self._get_bytes(uri)
        return [] if body is None else gunzip(body).decode("utf-8", errors="replace").splitlines()

    def result_document(self, uri: str | None) -> JobOutcome | None:
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
        bucket, key = s3_location(uri)
        try:
            with aws_errors(f"read {uri}"):
                return bytes(self._s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        except NotFound:
            return None

    def _put_text(self, uri: str, text: str) -> None:
        bucket, key = s3_location(uri)
        encryption: dict[str, str] = {"ServerSideEncryption": "AES256"}
        if self._settings.kms_key_arn:  # the spec carries Kafka credentials
            encryption = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self._settings.kms_key_arn}
        with aws_errors(f"write {uri}"):
            self._s3.put_object(
                Bucket=bucket, Key=key, Body=text.encode(), ContentType="application/json", **encryption
            )
