"""The run page and the estate console: HTML for people studying runs (docs/decisions/0059)."""
