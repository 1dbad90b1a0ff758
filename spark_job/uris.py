"""Read and write small text documents (spec, result) at a path, ``file://`` or ``s3://`` URI.

The same job runs locally and on EMR Serverless, where the spec and the result live in S3; boto3
is imported only when an ``s3://`` URI is actually used.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse


def split_s3(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ``("bucket", "a/b")``; the one place an S3 URI is taken apart."""
    parsed = urlparse(uri)
    return parsed.netloc, parsed.path.lstrip("/")


def local_path(uri: str) -> Path:
    """The local file a path or ``file://`` URI names."""
    return Path(unquote(urlparse(uri).path)) if uri.startswith("file://") else Path(uri)


def read_text(uri: str) -> str:
    if uri.startswith("s3://"):
        import boto3  # only the EMR path needs it

        bucket, key = split_s3(uri)
        body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"]
        return body.read().decode()
    return local_path(uri).read_text()


def write_text(uri: str, text: str) -> None:
    """Write atomically (a reader never sees half a document)."""
    if uri.startswith("s3://"):
        import boto3

        bucket, key = split_s3(uri)
        boto3.client("s3").put_object(
            Bucket=bucket, Key=key, Body=text.encode(), ContentType="application/json"
        )
        return
    target = local_path(uri)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(handle, "w") as stream:
        stream.write(text)
    Path(temporary).replace(target)
