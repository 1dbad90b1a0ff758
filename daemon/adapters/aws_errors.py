"""`aws_errors`: the one place AWS errors become domain errors.

Every boto call of the EMR launcher and of packaging runs inside `with aws_errors("<what>")`, which maps
AWS error codes to `daemon.core.errors` (`from exc`, so the AWS response stays in the traceback).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from daemon.core.errors import ConfigError, Conflict, NotFound, ReplayError, Unavailable

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


@contextmanager
def aws_errors(action: str) -> Iterator[None]:
    """Translate boto errors raised inside the block into domain errors naming `action`."""
    try:
        yield
    except ClientError as exc:
        raise _translate(action, exc) from exc
    except NoCredentialsError as exc:
        raise ConfigError(f"{action}: no AWS credentials found") from exc
    except BotoCoreError as exc:
        raise Unavailable(f"{action}: {exc}") from exc
    except Exception as exc:
        if not _upload_failed(exc):
            raise
        raise Unavailable(f"{action}: {exc}") from exc


def _upload_failed(exc: Exception) -> bool:
    """boto3's S3 transfer failure, looked up where boto3 already is: only code that uploaded with boto3
    can raise it, and importing boto3 at the top would cost every daemon's start for nothing."""
    uploads = sys.modules.get("boto3.exceptions")
    return uploads is not None and isinstance(exc, uploads.S3UploadFailedError)


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
