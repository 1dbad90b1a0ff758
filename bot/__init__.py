"""Slack app: slash commands and buttons, a thin client of the Replay Service."""
