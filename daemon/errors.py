"""Domain errors with messages a person can act on; the edges translate them.

ReplayError                      user-facing message in ``str(exc)``
├── ConfigError                  bad/missing settings or catalog: exit at start-up
│   └── CatalogError             names the file, the source and the field
├── BadRequest (ValueError)      bad input: Slack ephemeral reply, HTTP 400/422, CLI exit 2
│   ├── UnknownSource (LookupError)
│   └── EmptyWindow
├── Forbidden (PermissionError)  not an owner/admin: HTTP 403
├── NotFound (LookupError)       HTTP 404
├── Conflict                     HTTP 409 (e.g. cancelling a finished run)
└── Unavailable                  a dependency (broker, daemon, Spark) is down: HTTP 503
"""

from __future__ import annotations


class ReplayError(Exception):
    """Base of every error whose message is safe and useful to show to a user."""

    http_status = 500


class ConfigError(ReplayError):
    """Settings or catalog are unusable; the process should not start."""


class CatalogError(ConfigError):
    def __init__(self, path: str, source: str | None, field: str | None, problem: str) -> None:
        where = path
        if source:
            where += f": source '{source}'"
        if field:
            where += f": field '{field}'"
        super().__init__(f"{where}: {problem}")
        self.path, self.source, self.field, self.problem = path, source, field, problem


class BadRequest(ReplayError, ValueError):
    http_status = 400


class UnknownSource(BadRequest, LookupError):
    def __init__(self, name: str, known: list[str]) -> None:
        listing = ", ".join(sorted(known)) or "none"
        super().__init__(f"unknown source '{name}' (known sources: {listing})")
        self.name = name


class EmptyWindow(BadRequest):
    http_status = 422


class Forbidden(ReplayError, PermissionError):
    http_status = 403


class NotFound(ReplayError, LookupError):
    http_status = 404


class Conflict(ReplayError):
    http_status = 409


class Unavailable(ReplayError):
    http_status = 503
