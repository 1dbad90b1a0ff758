"""`replay completion bash`: a small bash completion script built from the command and flag lists.

It completes the first word (a command), `help`'s topic, and flags; source names, run ids and groups
would need the daemon, so they are left to the user.

    eval "$(replay completion bash)"      # in ~/.bashrc
"""

from __future__ import annotations

from daemon.cli.usage import CLI_COMMANDS, FLAGS, PROG
from daemon.core.errors import BadRequest
from daemon.core.grammar.help import USAGE

SHELLS = ("bash",)


def command_words() -> list[str]:
    """What may start a command line: the grammar's commands, then the CLI's own."""
    return [topic for topic in USAGE if topic != "replay"] + list(CLI_COMMANDS)


def completion_script(shell: str) -> str:
    if shell not in SHELLS:
        raise BadRequest(f"no completion for '{shell}': {PROG} completion {'|'.join(SHELLS)}")
    commands = " ".join(command_words())
    flags = " ".join(name for flag in FLAGS for name in flag.names)
    function = f"_{PROG}_complete"
    return f"""# bash completion for `{PROG}`: eval "$({PROG} completion bash)"
{function}() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "{flags}" -- "$cur"))
    elif (( COMP_CWORD == 1 )); then
        COMPREPLY=($(compgen -W "{commands}" -- "$cur"))
    elif (( COMP_CWORD == 2 )) && [[ $prev == help ]]; then
        COMPREPLY=($(compgen -W "{commands}" -- "$cur"))
    elif (( COMP_CWORD == 2 )) && [[ $prev == completion ]]; then
        COMPREPLY=($(compgen -W "{" ".join(SHELLS)}" -- "$cur"))
    else
        COMPREPLY=()
    fi
}}
complete -o default -F {function} {PROG}"""
