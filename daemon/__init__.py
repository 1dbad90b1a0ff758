"""The Replay Service: API, launchers, watcher, scheduler, notifier."""
