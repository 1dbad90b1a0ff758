"""What `replay` says about itself: `--help`, `help [command]`, `--version`, exit codes and its flags.

Built from the grammar's topic table (`daemon.core.grammar.help`) and the flags below, so `--help`,
`help <command>`, the bash completion and the command list in docs/usage.md (`scripts/command_help.py`)
list the same commands and flags. None of it needs settings, a token or a daemon.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

from daemon.core.grammar.help import PREFIX, SUMMARY, USAGE, help_text

DISTRIBUTION = "kafka-replay"
PROG = "replay"

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
EXIT_CODES = (
    (EXIT_OK, "success"),
    (
        EXIT_FAILED,
        "the run failed, or the service refused or could not be reached (reconcile --follow: not clean)",
    ),
    (EXIT_BAD_INPUT, "bad input: the command, a name or a setting"),
    (EXIT_INTERRUPTED, "Ctrl-C: a followed run goes on, and the command that cancels it is printed"),
)


@dataclass(frozen=True)
class Flag:
    names: tuple[str, ...]
    dest: str
    help: str
    metavar: str | None = None  # None: an on/off switch


FLAGS = (
    Flag(("--follow",), "follow", "show progress until the run ends (Ctrl-C stops watching, not the run)"),
    Flag(("--json",), "json", "print the service's answers as JSON lines (the wire contract)"),
    Flag(
        ("--yes", "--confirm-live"),
        "confirm",
        "confirm: publish into a live topic, unschedule, rewind without asking",
    ),
    Flag(("--as",), "actor", "the Slack user id to act as (default: REPLAY_USER or your login)", "USER"),
    Flag(("-o", "--output"), "output", "chart: the PNG file to write", "FILE"),
    Flag(("--version",), "version", "print the version and exit"),
    Flag(("-h", "--help"), "help", "print this help and exit"),
)

# Commands of the command line only (Slack has no login, no shell): topic -> (usage, summary).
CLI_COMMANDS = {
    "login": ("login [daemon URL]", "store your personal token for this user (asked for, not echoed)"),
    "logout": ("logout", "forget the stored token"),
    "completion": (
        "completion bash|zsh|fish",
        'print a completion script: eval "$(replay completion bash)" (zsh alike; fish: | source)',
    ),
}


def version_text() -> str:
    try:
        return f"{PROG} {version(DISTRIBUTION)}"
    except PackageNotFoundError:  # run from a source tree that was never installed
        return f"{PROG} (version unknown: {DISTRIBUTION} is not installed)"


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """The flags anywhere among the command's words (`replay orders last=1h --follow`)."""
    parser = argparse.ArgumentParser(prog=PROG, add_help=False)
    for flag in FLAGS:
        if flag.metavar is None:
            parser.add_argument(*flag.names, dest=flag.dest, action="store_true", help=flag.help)
        else:
            parser.add_argument(*flag.names, dest=flag.dest, metavar=flag.metavar, help=flag.help)
    parser.add_argument("words", nargs="*")
    return parser.parse_intermixed_args(argv)


def _cli_form(text: str) -> str:
    """The Slack usage written as typed in a shell: `/replay status` -> `replay status`."""
    return text.replace(f"{PREFIX} ", f"{PROG} ")


def _short_usage(topic: str) -> str:
    """A command's words up to its first option (`rewind <group> <topic> …`): one line in `--help`."""
    words = USAGE[topic].removeprefix(f"{PREFIX} ").split()
    shown = words[: next((i for i, w in enumerate(words) if "=" in w), len(words))]
    return " ".join(shown) + (" …" if len(shown) < len(words) else "")


def _rows(rows: Sequence[tuple[str, str]], width: int) -> list[str]:
    return [f"  {left:<{width}}  {right}".rstrip() for left, right in rows]


def _shell_example(line: str) -> str:
    """An example as a shell takes it: `lag<50k` quoted, or the shell would read a redirection."""
    indent = line[: len(line) - len(line.lstrip())]
    return indent + shlex.join(shlex.split(_cli_form(line)))


def _cli_help_text(topic: str | None = None) -> str:
    """The grammar's help as typed in a shell: `replay …`, its examples quoted for the shell."""
    lines = help_text(topic).splitlines()
    examples_from = lines.index("Examples:") if "Examples:" in lines else len(lines)
    return "\n".join(
        _shell_example(line) if i > examples_from else _cli_form(line) for i, line in enumerate(lines)
    )


def _notes_and_examples() -> list[str]:
    """The grammar's help without its usage lines (`--help` has one line per command instead)."""
    usage_lines = {"Usage:", *(f"  {_cli_form(line)}" for line in USAGE.values())}
    return [line for line in _cli_help_text().splitlines() if line not in usage_lines]


def cli_help() -> str:
    """`replay --help`: every command and every flag, one line each, and the exit codes."""
    commands = [(_short_usage(topic), SUMMARY[topic]) for topic in USAGE]
    commands += list(CLI_COMMANDS.values())
    flags = [(", ".join(f.names) + (f" {f.metavar}" if f.metavar else ""), f.help) for f in FLAGS]
    width = max(len(left) for left, _ in [*commands, *flags])
    return "\n".join(
        [
            f"usage: {PROG} [flags] <command> [arguments]",
            f"The {PREFIX} commands of Slack, typed in a shell. `{PROG} help` shows every usage line with",
            f"notes and examples, `{PROG} help <command>` one command's.",
            "",
            "commands:",
            *_rows(commands, width),
            "",
            *_notes_and_examples(),
            "",
            "flags (anywhere on the line):",
            *_rows(flags, width),
            "",
            "exit codes:",
            *_rows([(str(code), meaning) for code, meaning in EXIT_CODES], 3),
            "",
            "Who is asking: --as, REPLAY_USER or `replay login`; where the service is: REPLAY_DAEMON_URL.",
        ]
    )


def topic_help(topic: str | None) -> str:
    """`replay help`: the grammar's whole help; `replay help <command>`: that command only."""
    if topic is None:
        return _cli_help_text()
    if topic in CLI_COMMANDS:
        usage, summary = CLI_COMMANDS[topic]
        return f"Usage: {PROG} {usage}\n{summary}"
    return f"{_cli_form(help_text(topic))}\n{SUMMARY[topic]}"
