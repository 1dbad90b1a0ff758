"""`replay` explains itself with nothing set up: `--help`, `help [command]`, `--version`, completion.

The help commands run as a real `replay` process with an empty environment and a fresh home (no
`REPLAY_*` variable, no stored login, no daemon); the command list in docs/usage.md is checked against
what `--help` prints.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from daemon.cli.completion import command_words, completion_script
from daemon.cli.main import EXIT_BAD_INPUT, EXIT_OK
from daemon.cli.usage import CLI_COMMANDS, parse_arguments
from daemon.core.grammar.help import SUMMARY, USAGE
from scripts.command_help import END, START, USAGE_GUIDE, main, render_block, replace_block

ROOT = Path(__file__).resolve().parents[2]
# The flags an operator reaches for, each of which `--help` must name.
EXPECTED_FLAGS = ("--follow", "--json", "--yes", "--confirm-live", "--as", "-o", "--output", "--version")


def _replay(*argv: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`replay …` as its own process: no REPLAY_* variable, a home without credentials."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    return subprocess.run(
        [sys.executable, "-m", "daemon.cli.main", *argv],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _section(text: str, title: str) -> list[str]:
    """The indented lines under `title:` in `--help`."""
    lines = text.splitlines()
    start = lines.index(title) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("  ")), len(lines))
    return lines[start:end]


def test_help_for_one_topic_needs_no_settings_and_prints_only_that_topic(tmp_path: Path) -> None:
    result = _replay("help", "plan", home=tmp_path)

    assert result.returncode == EXIT_OK, result.stderr
    assert result.stdout.splitlines() == [
        "Usage: " + USAGE["plan"].replace("/replay ", "replay "),
        SUMMARY["plan"],
    ]


def test_full_help_needs_no_settings_and_shows_every_usage_line(tmp_path: Path) -> None:
    result = _replay("help", home=tmp_path)

    assert result.returncode == EXIT_OK, result.stderr
    for usage in USAGE.values():
        assert usage.replace("/replay ", "replay ") in result.stdout
    assert "Examples:" in result.stdout


def test_version_is_the_installed_package_version(tmp_path: Path) -> None:
    result = _replay("--version", home=tmp_path)

    assert result.returncode == EXIT_OK, result.stderr
    assert result.stdout == f"replay {version('kafka-replay')}\n"


def test_help_names_the_command_lines_own_commands(tmp_path: Path) -> None:
    result = _replay("help", "login", home=tmp_path)

    assert result.returncode == EXIT_OK
    assert result.stdout.splitlines() == ["Usage: replay login [daemon URL]", CLI_COMMANDS["login"][1]]


def test_help_on_an_unknown_topic_is_bad_input(tmp_path: Path) -> None:
    result = _replay("help", "nope", home=tmp_path)

    assert result.returncode == EXIT_BAD_INPUT
    assert "`nope`: no such command" in result.stderr


def test_dash_dash_help_lists_every_command_with_one_line_each(tmp_path: Path) -> None:
    result = _replay("--help", home=tmp_path)

    assert result.returncode == EXIT_OK, result.stderr
    commands = _section(result.stdout, "commands:")
    expected = [*(name for name in USAGE if name != "replay"), *CLI_COMMANDS]
    for name in expected:
        matching = [line for line in commands if line.split()[0] == name]
        assert len(matching) == 1, name
        assert matching[0].rstrip().endswith(SUMMARY.get(name) or CLI_COMMANDS[name][1])
    assert commands[0].startswith("  <source> <window> …") and commands[0].endswith(SUMMARY["replay"])
    assert len(commands) == len(expected) + 1


def test_dash_dash_help_lists_every_flag_and_each_one_is_accepted(tmp_path: Path) -> None:
    result = _replay("--help", home=tmp_path)

    flags = _section(result.stdout, "flags (anywhere on the line):")
    named = {name.rstrip(",") for line in flags for name in line.split() if name.startswith("-")}
    assert set(EXPECTED_FLAGS) <= named
    parsed = parse_arguments(["status", "--follow", "--json", "--yes", "--as", "U1", "-o", "x.png"])
    assert (parsed.follow, parsed.json, parsed.confirm, parsed.actor, parsed.output) == (
        True,
        True,
        True,
        "U1",
        "x.png",
    )
    assert parse_arguments(["--confirm-live"]).confirm and parse_arguments(["--version"]).version


def test_dash_dash_help_documents_the_interrupt_exit_code(tmp_path: Path) -> None:
    result = _replay("--help", home=tmp_path)

    codes = {line.split()[0]: line for line in _section(result.stdout, "exit codes:")}
    assert sorted(codes) == ["0", "1", "130", "2"]
    assert "goes on" in codes["130"]


def test_every_grammar_command_has_a_one_line_summary() -> None:
    assert list(SUMMARY) == list(USAGE)
    assert all(summary and "\n" not in summary for summary in SUMMARY.values())


def _complete(script: str, *words: str) -> list[str]:
    """Run the completion function in a real bash, as if TAB were pressed after `words`."""
    line = " ".join(f"'{word}'" for word in words)
    press_tab = f"COMP_WORDS=(replay {line}); COMP_CWORD={len(words)}; _replay_complete"
    program = "\n".join([script, press_tab, 'printf "%s\\n" "${COMPREPLY[@]}"'])
    result = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, check=True)
    return result.stdout.split()


def test_bash_completion_completes_commands_help_topics_and_flags(tmp_path: Path) -> None:
    result = _replay("completion", "bash", home=tmp_path)
    assert result.returncode == EXIT_OK, result.stderr
    script = result.stdout

    assert _complete(script, "p") == ["plan", "pipelines", "pipeline", "pause"]
    assert _complete(script, "lo") == ["login", "logout"]
    assert _complete(script, "help", "re") == ["reconcile", "redrive", "repair", "resume", "rewind"]
    assert _complete(script, "status", "--j") == ["--json"]
    assert _complete(script, "orders", "last=6h") == []
    assert set(command_words()) == {*USAGE, *CLI_COMMANDS} - {"replay"}


def test_zsh_completion_offers_commands_help_topics_shells_and_flags() -> None:
    script = completion_script("zsh")
    subprocess.run(["zsh", "-n", "-c", script], check=True)  # it parses

    def offered(*words: str) -> list[str]:
        # zsh filters what `compadd` is given by the prefix typed; this shows what it is given
        stubs = 'compdef() { :; }; compadd() { [[ $1 == -- ]] && shift; print -l -- "$@"; }; _files() { :; }'
        press_tab = f"words=(replay {' '.join(words)}); CURRENT={len(words) + 1}; _replay_complete"
        program = "\n".join([stubs, script, press_tab])
        result = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, check=True)
        return result.stdout.split()

    assert offered("p") == command_words()
    assert offered("help", "re") == command_words()
    assert offered("completion", "") == ["bash", "zsh", "fish"]
    assert "--json" in offered("status", "--j") and "plan" not in offered("status", "--j")
    assert offered("orders", "last=6h") == []


def test_fish_completion_completes_commands_help_topics_and_flags() -> None:
    script = completion_script("fish")

    def complete(line: str) -> list[str]:
        program = f"{script}\ncomplete -C '{line}'"
        result = subprocess.run(
            ["fish", "--no-config", "-c", program], capture_output=True, text=True, check=True
        )
        return [candidate.split("\t")[0] for candidate in result.stdout.splitlines()]

    assert complete("replay p") == sorted(word for word in command_words() if word.startswith("p"))
    assert complete("replay help re") == ["reconcile", "redrive", "repair", "resume", "rewind"]
    assert complete("replay completion ") == ["bash", "fish", "zsh"]
    assert complete("replay status --j") == ["--json"]


def test_completion_for_an_unknown_shell_is_bad_input(tmp_path: Path) -> None:
    result = _replay("completion", "tcsh", home=tmp_path)

    assert result.returncode == EXIT_BAD_INPUT
    assert "no completion for 'tcsh'" in result.stderr
    for shell in ("bash", "zsh", "fish"):
        assert completion_script(shell).startswith(f"# {shell} completion for `replay`")


def test_the_usage_guides_command_section_is_the_generated_one() -> None:
    checked_in = USAGE_GUIDE.read_text(encoding="utf-8")

    assert replace_block(checked_in, render_block()) == checked_in


def test_a_stale_command_section_fails_the_check_and_the_script_rewrites_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    guide = tmp_path / "usage.md"
    guide.write_text(f"# Using the platform\n\n{START}\n/replay an old command\n{END}\n\nAfter.\n")

    assert main(["--check", "--path", str(guide)]) == 1
    assert "stale" in capsys.readouterr().err
    assert main(["--path", str(guide)]) == 0
    assert guide.read_text() == f"# Using the platform\n\n{render_block()}\n\nAfter.\n"
    assert main(["--check", "--path", str(guide)]) == 0


def test_a_guide_without_its_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="marker"):
        replace_block("no markers here", render_block())
