"""``lag`` and ``rewind``: the commands about a consumer group, parsed and rendered.

Kept apart from the replay and pipeline commands: they name a Kafka consumer group and a topic, not
a source or a run. Group ids and topics are held to Kafka's legal topic characters (shell-safe).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from daemon.core.clusters import CLUSTER_NAME
from daemon.core.grammar.help import USAGE
from daemon.core.grammar.values import GrammarError, blaming, check_id
from daemon.core.ids import GROUP_ID_PATTERN, TOPIC_PATTERN
from daemon.core.quantities import InvalidValue
from daemon.core.rewind import RewindTo, parse_target, target_label

LAG_OPTIONS = ("cluster",)
REWIND_OPTIONS = ("to", "cluster")
EPOCH_START = datetime(1970, 1, 1, tzinfo=UTC)


def _check_group(group: str) -> None:
    if not GROUP_ID_PATTERN.fullmatch(group):
        raise InvalidValue(group, "not a consumer group id (letters, digits, '.', '_' or '-'; 249 at most)")


def _check_topic(topic: str) -> None:
    check_id(topic, TOPIC_PATTERN, "topic name (letters, digits, '.', '_' or '-'; 249 at most)")


def _check_cluster(cluster: str | None) -> None:
    if cluster is not None and not CLUSTER_NAME.match(cluster):
        raise InvalidValue(cluster, "not a cluster name (lower-case letters, digits, '-' and '_')")


def _check_target(to: RewindTo) -> None:
    if isinstance(to, datetime):
        if to.utcoffset() is None:
            raise TypeError("RewindCommand.to must be a timezone-aware datetime")
        if to < EPOCH_START:
            raise InvalidValue(None, "to= is before 1970")
    elif to not in ("earliest", "latest"):
        raise InvalidValue(None, f"to must be a time, earliest or latest, got '{to}'")


@dataclass(frozen=True)
class LagCommand:
    """A consumer group's lag on one topic, or on every topic it has offsets on; on ``cluster``, else
    the topic's (its source's), else the default one."""

    group: str
    topic: str | None = None
    cluster: str | None = None

    def __post_init__(self) -> None:
        with blaming(None, USAGE["lag"]):
            _check_group(self.group)
            if self.topic is not None:
                _check_topic(self.topic)
            _check_cluster(self.cluster)


@dataclass(frozen=True)
class RewindCommand:
    """Move a consumer group's committed offsets on one topic to an instant, the start or the end."""

    group: str
    topic: str
    to: RewindTo
    cluster: str | None = None  # None: the topic's source's cluster, else the default one

    def __post_init__(self) -> None:
        with blaming(None, USAGE["rewind"]):
            _check_group(self.group)
            _check_topic(self.topic)
            _check_target(self.to)
            _check_cluster(self.cluster)
            if isinstance(self.to, datetime):
                object.__setattr__(self, "to", self.to.astimezone(UTC))


def _positional(args: list[str]) -> tuple[list[str], list[str]]:
    """(positional words, key=value tokens) in the order typed."""
    words = [token for token in args if "=" not in token]
    options = [token for token in args if "=" in token]
    return words, options


def _group_and_topic(words: list[str], usage: str, *, topic_required: bool) -> tuple[str, str | None]:
    if not words:
        raise GrammarError("missing consumer group id", usage=usage)
    if topic_required and len(words) < 2:
        raise GrammarError("missing topic (the topic whose offsets move)", usage=usage)
    if len(words) > 2:
        raise GrammarError("unexpected extra argument", token=words[2], usage=usage)
    with blaming(words[0], usage):
        _check_group(words[0])
    topic = words[1] if len(words) > 1 else None
    if topic is not None:
        with blaming(topic, usage):
            _check_topic(topic)
    return words[0], topic


def _cluster_option(token: str, cluster: str | None, usage: str) -> str:
    """``cluster=<name>``: once, and a well-formed name (the daemon knows which ones exist)."""
    if cluster is not None:
        raise GrammarError("option 'cluster' given twice", token=token, usage=usage)
    value = token.partition("=")[2]
    with blaming(token, usage):
        _check_cluster(value)
    return value


def parse_lag(args: list[str]) -> LagCommand:
    usage = USAGE["lag"]
    words, options = _positional(args)
    cluster: str | None = None
    for token in options:
        if token.partition("=")[0].lower() not in LAG_OPTIONS:
            raise GrammarError(
                f"unknown option '{token.partition('=')[0]}' (allowed for lag: cluster)",
                token=token,
                usage=usage,
            )
        cluster = _cluster_option(token, cluster, usage)
    group, topic = _group_and_topic(words, usage, topic_required=False)
    return LagCommand(group, topic, cluster)


def parse_rewind(args: list[str]) -> RewindCommand:
    usage = USAGE["rewind"]
    words, options = _positional(args)
    group, topic = _group_and_topic(words, usage, topic_required=True)
    assert topic is not None
    to: RewindTo | None = None
    cluster: str | None = None
    for token in options:
        key, _, value = token.partition("=")
        if key.lower() not in REWIND_OPTIONS:
            raise GrammarError(
                f"unknown option '{key}' (allowed for rewind: to, cluster)", token=token, usage=usage
            )
        if key.lower() == "cluster":
            cluster = _cluster_option(token, cluster, usage)
            continue
        if to is not None:
            raise GrammarError("option 'to' given twice", token=token, usage=usage)
        with blaming(token, usage):
            to = parse_target(value)
    if to is None:
        raise GrammarError("missing to=<time>, to=earliest or to=latest (where the group goes)", usage=usage)
    return RewindCommand(group, topic, to, cluster)


def render_group_command(command: LagCommand | RewindCommand) -> str:
    named = [f"cluster={command.cluster}"] if command.cluster else []
    if isinstance(command, LagCommand):
        return " ".join(["lag", command.group, *([command.topic] if command.topic else []), *named])
    return " ".join(["rewind", command.group, command.topic, f"to={target_label(command.to)}", *named])
