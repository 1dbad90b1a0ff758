"""`replay completion bash|zsh|fish`: a small completion script built from the command and flag lists.

It completes the first word (a command), `help`'s topic, `completion`'s shell, and flags; source
names, run ids and groups would need the daemon, so they are left to the user.

    eval "$(replay completion bash)"      # in ~/.bashrc
    eval "$(replay completion zsh)"       # in ~/.zshrc, after compinit
    replay completion fish | source       # in ~/.config/fish/config.fish
"""

from __future__ import annotations

from daemon.cli.usage import CLI_COMMANDS, FLAGS, PROG
from daemon.core.errors import BadRequest
from daemon.core.grammar.help import USAGE

SHELLS = ("bash", "zsh", "fish")


def command_words() -> list[str]:
    """What may start a command line: the grammar's commands, then the CLI's own."""
    return [topic for topic in USAGE if topic != "replay"] + list(CLI_COMMANDS)


def completion_script(shell: str) -> str:
    if shell not in SHELLS:
        raise BadRequest(f"no completion for '{shell}': {PROG} completion {'|'.join(SHELLS)}")
    commands = " ".join(command_words())
    flags = " ".join(name for flag in FLAGS for name in flag.names)
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](commands, flags)


def _bash(commands: str, flags: str) -> str:
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


def _zsh(commands: str, flags: str) -> str:
    function = f"_{PROG}_complete"
    return f"""# zsh completion for `{PROG}`: eval "$({PROG} completion zsh)" (after compinit)
{function}() {{
    local cur=${{words[CURRENT]}} prev=${{words[CURRENT-1]}}
    if [[ $cur == -* ]]; then
        compadd -- {flags}
    elif (( CURRENT == 2 )); then
        compadd -- {commands}
    elif (( CURRENT == 3 )) && [[ $prev == help ]]; then
        compadd -- {commands}
    elif (( CURRENT == 3 )) && [[ $prev == completion ]]; then
        compadd -- {" ".join(SHELLS)}
    else
        _files
    fi
}}
compdef {function} {PROG}"""


def _fish(commands: str, flags: str) -> str:
    shells = " ".join(SHELLS)
    lines = [
        f"# fish completion for `{PROG}`: {PROG} completion fish | source",
        f"complete -c {PROG} -f",
        f"complete -c {PROG} -n __fish_use_subcommand -a '{commands}'",
        f"complete -c {PROG} -n '__fish_seen_subcommand_from help' -a '{commands}'",
        f"complete -c {PROG} -n '__fish_seen_subcommand_from completion' -a '{shells}'",
    ]
    for flag in FLAGS:
        for name in flag.names:
            option = f"-l {name[2:]}" if name.startswith("--") else f"-s {name[1:]}"
            lines.append(f"complete -c {PROG} {option}")
    return "\n".join(lines)
