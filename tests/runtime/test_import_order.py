"""Every module of the core imports on its own, first, as in a fresh interpreter.

An import cycle hides as long as some other module happens to be imported before the one that
closes it (``daemon.core.predicates`` imported the grammar package, whose commands imported it
back: fine after the grammar, an ImportError first). Each module here is imported with every
project module dropped from ``sys.modules`` before it; third-party ones stay loaded, so it is quick.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The pure core, whose modules import each other the most; an adapter or a front end that imports a
# core module first is then safe too.
PACKAGES = ("daemon/core",)

PROBE = """
import importlib, sys
names = sys.argv[1:]
failed = []
for name in names:
    for loaded in [m for m in sys.modules if m.split(".")[0] in {"bot", "daemon", "spark_job", "store"}]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
"""


def core_modules() -> list[str]:
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_core_module_imports_first() -> None:
    names = core_modules()
    assert "daemon.core.grammar.predicates" in names and len(names) > 40
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, *names], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert probe.stdout.strip() == "", probe.stdout
