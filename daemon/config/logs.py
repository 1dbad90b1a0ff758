"""structlog set-up, done once per process: JSON lines in production, a readable console in development.

Every event passes through :class:`SecretRedactor` before rendering, so a token handed to a log call by
mistake (as a value, inside a header dict, or inside a message string) is replaced with ``[redacted]``.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any, TextIO

import structlog

REDACTED = "[redacted]"
_SENSITIVE_KEY = re.compile(r"(token|secret|password|passwd|authorization|api[_-]?key|signature)", re.I)
# Shapes of credentials that may hide inside free text: Slack tokens and bearer headers.
_SENSITIVE_TEXT = re.compile(r"(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|Bearer\s+[A-Za-z0-9._~+/=-]+)")


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


def configure_logging(
    *,
    log_format: str = "console",
    level: str = "INFO",
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
) -> None:
    """Configure structlog (and route stdlib logging through it) for the whole process."""
    out = stream or sys.stderr
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
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
