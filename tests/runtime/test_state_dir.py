"""What the daemon keeps on disk is its user's alone: the state directory 0700, the SQLite store 0600."""

from __future__ import annotations

import stat

from tests.fixtures.daemon import NO_JOBS, DaemonProcess

pytestmark = [NO_JOBS]


def test_the_state_directory_and_the_store_are_private_to_the_daemons_user(
    replay_daemon: DaemonProcess,
) -> None:
    state = replay_daemon.state_dir
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "replay.db").stat().st_mode) == 0o600
    journals = [path for path in state.glob("replay.db-*")]  # WAL and shared memory, when SQLite made them
    assert all(stat.S_IMODE(path.stat().st_mode) & 0o077 == 0 for path in journals)
