from __future__ import annotations

import io
import json
import logging
import threading
import time

import pytest
import structlog

from daemon.config.logs import REDACTED, configure_logging


def _json_lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_a_configured_secret_never_appears_in_output() -> None:
    out = io.StringIO()
    configure_logging(log_format="json", secrets=["s3cr3t-api-token"], stream=out)

    structlog.get_logger().info("calling daemon with s3cr3t-api-token", header="Bearer s3cr3t-api-token")

    assert "s3cr3t-api-token" not in out.getvalue()
    assert _json_lines(out)[0]["event"] == f"calling daemon with {REDACTED}"


def test_sensitive_keys_are_masked_at_any_depth() -> None:
    out = io.StringIO()
    configure_logging(log_format="json", stream=out)

    structlog.get_logger().info(
        "request", headers={"Authorization": "Bearer abc.def", "Accept": "json"}, signing_secret="xyz1"
    )

    line = _json_lines(out)[0]
    assert line["headers"] == {"Authorization": REDACTED, "Accept": "json"}
    assert line["signing_secret"] == REDACTED


def test_slack_shaped_tokens_in_free_text_are_masked() -> None:
    out = io.StringIO()
    configure_logging(log_format="json", stream=out)

    structlog.get_logger().warning("slack refused xoxb-123-456-abcdef for channel C1")

    assert "xoxb-123" not in out.getvalue()
    assert "for channel C1" in out.getvalue()


def test_stdlib_loggers_go_through_the_redactor() -> None:
    import logging

    out = io.StringIO()
    configure_logging(log_format="json", secrets=["hunter2-password"], stream=out)

    logging.getLogger("uvicorn.error").warning("login with hunter2-password")

    assert "hunter2-password" not in out.getvalue()
    assert _json_lines(out)[0]["event"] == f"login with {REDACTED}"


def test_bound_run_id_is_carried_as_a_key() -> None:
    out = io.StringIO()
    configure_logging(log_format="json", stream=out)

    structlog.get_logger().bind(run_id="r-42").info("launched")

    assert _json_lines(out)[0]["run_id"] == "r-42"


class _SlowStream(io.StringIO):
    """A stream whose writes let other threads run, as a file's do while the disk is busy."""

    def write(self, text: str) -> int:
        time.sleep(0.0002)
        return super().write(text)


def test_lines_from_structlog_and_stdlib_threads_never_share_a_line() -> None:
    """The daemon's threads log through structlog and through stdlib logging (uvicorn, APScheduler)
    into one stream: each record is one whole line, or a log reader meets two on one line."""
    out = _SlowStream()
    configure_logging(log_format="json", stream=out)

    def from_structlog() -> None:
        for n in range(300):
            structlog.get_logger().info("from structlog", n=n)

    def from_stdlib() -> None:
        for n in range(300):
            logging.getLogger("apscheduler").warning("from stdlib %d", n)

    writers = [threading.Thread(target=from_structlog), threading.Thread(target=from_stdlib)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    lines = _json_lines(out)  # fails on a line holding two records
    assert len(lines) == 600


def test_a_page_links_token_in_a_logged_path_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn's access log writes the path it served, `/login?token=…` included."""
    out = io.StringIO()
    configure_logging(log_format="json", stream=out)
    access = logging.getLogger("uvicorn.access")
    # as replayd runs it (`log_config=None`), whatever an in-process server of another test set up
    monkeypatch.setattr(access, "handlers", [])
    monkeypatch.setattr(access, "propagate", True)
    monkeypatch.setattr(access, "disabled", False)
    monkeypatch.setattr(access, "level", logging.NOTSET)

    access.info(
        '%s - "%s %s HTTP/%s" %d',
        "127.0.0.1:5",
        "GET",
        "/login?token=eyJ1IjoiVTEifQ.aB-c_d.e&x=1",
        "1.1",
        303,
    )

    line = str(_json_lines(out)[0]["event"])
    assert "eyJ1IjoiVTEifQ" not in line
    assert f"/login?token={REDACTED}&x=1" in line
