"""What the `replay` CLI reads from its environment: where the service is, the token, who is asking.

The CLI is a client: the daemon's own variables (its launcher, its database, its Kafka) are none of its
business, so a workstation with `REPLAY_LAUNCHER` set for something else still runs `replay list`.
The platform's limits are the daemon's to enforce; the CLI parses with the grammar's defaults and
shows the daemon's refusal when a command is over its limits.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from daemon.core.errors import ConfigError

ENV_PREFIX = "REPLAY_"
DEFAULT_DAEMON_URL = "http://127.0.0.1:8700"


class ClientSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    daemon_url: str | None = Field(default=None, description="where replayd is; default: `replay login`'s")
    api_token: SecretStr | None = Field(default=None, description="your personal token (else `replay login`)")
    user: str | None = Field(default=None, description="your Slack user id (else `replay login`'s)")
    allow_plain_http: bool = Field(
        default=False, description="send the token over plain http to a host other than this machine"
    )


def load_client_settings(environ: Mapping[str, str] | None = None) -> ClientSettings:
    """The CLI's settings from `environ` (default: the process environment); one ConfigError line on error."""
    try:
        if environ is None:
            return ClientSettings()
        values = {k[len(ENV_PREFIX) :].lower(): v for k, v in environ.items() if k.startswith(ENV_PREFIX)}
        return ClientSettings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = ENV_PREFIX + "_".join(str(part) for part in error["loc"]).upper()
        raise ConfigError(f"{name}: {error['msg']}") from None
