"""The daemon's settings reach the launcher it builds (`daemon.runtime.server.build_launcher`)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from daemon.adapters.local_launcher import RELEASED, LocalSparkLauncher
from daemon.config.settings import Settings
from daemon.runtime.server import build_launcher


def _released_run_folder(runs: Path, run_id: str, *, age_days: float) -> Path:
    folder = runs / run_id
    folder.mkdir(parents=True)
    for name in ("lock", "stdout.log", "stderr.log", RELEASED):
        (folder / name).write_text("")
    then = time.time() - age_days * 86400
    for path in (*folder.iterdir(), folder):
        os.utime(path, (then, then))
    return folder


def test_a_local_launcher_keeps_released_run_folders_as_long_as_the_setting_says(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    old = _released_run_folder(runs, "r-old", age_days=3)
    recent = _released_run_folder(runs, "r-recent", age_days=1)
    settings = Settings(
        state_dir=tmp_path, local_run_dirs_keep_days=2, local_standby=False, local_class_archive=False
    )

    launcher = build_launcher(settings)

    assert isinstance(launcher, LocalSparkLauncher)
    assert (old.exists(), recent.exists()) == (False, True)
