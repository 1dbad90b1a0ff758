"""structlog set-up, done once per process: JSON lines in production, a readable console in development.

Every event passes through :class:`SecretRedactor` before rendering, so a token handed to a log call by
mistake (as a value, inside a header dict, or inside a message string) is replaced with ``[redacted]``.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Iterable, MutableMapping
from typing import Any, TextIO

import structlog

REDACTED = "[redacted]"
_SENSITIVE_KEY = re.compile(r"(token|secret|password|passwd|authorization|api[_-]?key|signature)", re.I)
# Shapes of credentials that may hide inside free text: Slack tokens and bearer headers.
# Slack tokens, bearer tokens, and a page link's token in a logged URL (`/login?token=…`: it signs in
# whoever opens it for some minutes, and uvicorn's access log writes every path it served)
_SENSITIVE_TEXT = re.compile(
    r"(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|Bearer\s+[A-Za-z0-9._~+/=-]+|(?<=[?&]token=)[^\s&\"']+)"
)


class SecretRedactor:
    """A structlog processor: masks sensitive keys, known secret values and token-shaped text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def __call__(self, _logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> Any:
        return {key: self._clean(key, value) for key, value in event_dict.items()}

    def _clean(self, key: str, value: Any) -> Any:
        if _SENSITIVE_KEY.search(key) and value not in (None, ""):
            return REDACTED
        if isinstance(value, dict):
            return {k: self._clean(str(k), v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._clean(key, v) for v in value)
        if isinstance(value, str | bytes | BaseException):
            return self._scrub(value if isinstance(value, str) else repr(value))
        return value

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return _SENSITIVE_TEXT.sub(REDACTED, text)


class _LineWriter:
    """One stream for every record of the process, each written as one whole line under one lock.

    structlog's records and the stdlib's (uvicorn, APScheduler) come from different threads; with a
    lock each, a record written in two parts (the text, then its newline, as ``print`` does) can be
    cut by another, and a log reader meets two records on one line.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def msg(self, message: str) -> None:
        with self.lock:
            self.stream.write(message + "\n")
            self.stream.flush()

    log = debug = info = warn = warning = err = error = critical = exception = fatal = msg


class _LineHandler(logging.Handler):
    """The stdlib's records (uvicorn, APScheduler) through the same writer as structlog's."""

    def __init__(self, lines: _LineWriter) -> None:
        super().__init__()
        self._lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._lines.msg(self.format(record))
        except Exception:  # as logging.StreamHandler does: a broken stream must not break the caller
            self.handleError(record)


def configure_logging(
    *,
    log_format: str = "console",
    level: str = "INFO",
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
) -> None:
    """Configure structlog (and route stdlib logging through it) for the whole process."""
    out = stream or sys.stderr
    lines = _LineWriter(out)
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        SecretRedactor(secrets),
    ]
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=lambda *args: lines,
        cache_logger_on_first_use=False,
    )
    handler = _LineHandler(lines)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
