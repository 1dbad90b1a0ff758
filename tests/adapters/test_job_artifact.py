"""The job artifact holds what executors run and nothing else: spark_job's own modules.

Built the way the product builds it (``replay package`` for EMR, ``main.py``'s ``addPyFile`` bundle
for a local spark-submit), then listed. The expected set comes from the package as Python finds it,
so a stray file (a dev tool, a test, a folder that is not a package) shows up as a difference.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import pkgutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

import spark_job
from daemon.adapters.packaging import Artifact, build_artifact
from spark_job.main import package_archive

PACKAGE_DIR = Path(spark_job.__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
DEV_TOOLS = sorted(p.name for p in (REPO_ROOT / "scripts" / "devtools").glob("*.py") if p.stem != "__init__")
NOT_ON_EXECUTORS = frozenset({"bench", "bot", "daemon", "hypothesis", "pytest", "scripts", "store", "tests"})


def expected_entries() -> set[str]:
    """Every module of the spark_job package, as the zip entry its source file becomes."""
    names = ["spark_job"] + [
        module.name for module in pkgutil.walk_packages(spark_job.__path__, prefix="spark_job.")
    ]
    entries = set()
    for name in names:
        found = importlib.util.find_spec(name)
        assert found is not None and found.origin is not None, name
        entries.add(Path(found.origin).relative_to(REPO_ROOT).as_posix())
    return entries


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Artifact:
    """The job as ``replay package`` builds it for EMR Serverless."""
    return build_artifact(tmp_path_factory.mktemp("artifact"))


@pytest.fixture(scope="module")
def emr_zip(artifact: Artifact) -> list[str]:
    with zipfile.ZipFile(artifact.package) as bundle:
        return bundle.namelist()


def test_the_emr_zip_holds_exactly_the_packages_modules(emr_zip: list[str]) -> None:
    assert expected_entries() == set(emr_zip)
    assert len(emr_zip) == len(set(emr_zip))


def test_the_emr_zip_holds_no_dev_tool(emr_zip: list[str]) -> None:
    assert DEV_TOOLS, "scripts/devtools lists the dev tools this test keeps out"
    assert set() == {name for name in emr_zip if Path(name).name in DEV_TOOLS}
    assert set() == {name for name in emr_zip if not name.startswith("spark_job/")}


def test_the_local_bundle_holds_what_the_emr_zip_holds(tmp_path: Path, emr_zip: list[str]) -> None:
    with zipfile.ZipFile(package_archive(PACKAGE_DIR, tmp_path / "job-packages")) as bundle:
        assert sorted(emr_zip) == sorted(bundle.namelist())


def test_a_local_jobs_archive_is_built_once_per_content_in_a_private_folder(tmp_path: Path) -> None:
    package = tmp_path / "spark_job"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "job.py").write_text("A = 1\n")
    cache = tmp_path / "cache" / "job-packages"

    first = package_archive(package, cache)
    os.utime(first, (0, 0))
    assert package_archive(package, cache) == first  # the next job ships the same file
    assert first.stat().st_mtime > time.time() - 60  # and marks its use: the launcher prunes unused ones
    (package / "job.py").write_text("A = 2\n")
    changed = package_archive(package, cache)

    assert changed != first
    with zipfile.ZipFile(changed) as bundle:
        assert bundle.read("spark_job/job.py") == b"A = 2\n"
    assert sorted(path.name for path in cache.iterdir()) == sorted([first.name, changed.name])  # no .tmp
    assert cache.stat().st_mode & 0o777 == 0o700


def test_no_module_in_the_zip_imports_what_executors_lack(artifact: Artifact) -> None:
    imported: dict[str, set[str]] = {}
    with zipfile.ZipFile(artifact.package) as bundle:
        for name in bundle.namelist():
            tree = ast.parse(bundle.read(name), filename=name)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    tops = {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    tops = {node.module.split(".")[0]}
                else:
                    continue
                if tops & NOT_ON_EXECUTORS:
                    imported.setdefault(name, set()).update(tops & NOT_ON_EXECUTORS)
    assert not imported, imported


def test_every_module_imports_from_the_zip_alone(artifact: Artifact, tmp_path: Path) -> None:
    """Executors have the zip and the job's libraries: no repository checkout on their path."""
    names = sorted(
        entry.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for entry in expected_entries()
    )
    probe = (
        "import importlib\n"
        f"for name in {names!r}:\n"
        "    module = importlib.import_module(name)\n"
        f"    assert module.__file__.startswith({str(artifact.package)!r}), module.__file__\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": str(artifact.package), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
