"""`replay help [command]` and `replay completion bash`: answered before any setting is read.

So they work at 3 a.m. on a machine where nothing is set up: no `REPLAY_USER`, no token, no daemon.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TextIO

from daemon.cli.completion import completion_script
from daemon.cli.usage import CLI_COMMANDS, EXIT_OK, topic_help
from daemon.core.grammar import HelpCommand, parse


def answer_without_settings(words: Sequence[str], out: TextIO) -> int | None:
    """The exit code once `help …` or `completion …` is answered; None for every other command."""
    first = words[0].lower() if words else ""
    if first == "completion":
        print(completion_script(words[1] if len(words) > 1 else "bash"), file=out)
        return EXIT_OK
    if first != "help":
        return None
    if len(words) == 2 and words[1].lower() in CLI_COMMANDS:
        print(topic_help(words[1].lower()), file=out)
        return EXIT_OK
    command = parse(shlex.join(words))  # the grammar's topics; an unknown one is a GrammarError (exit 2)
    assert isinstance(command, HelpCommand)  # `help …` parses to help or raises
    print(topic_help(command.topic), file=out)
    return EXIT_OK
