"""`make chaos`: the platform under crashes, restarts, rate limits, crowds and hostile input.

Each scenario drives the real services (replayd as a child process, local Spark, a real broker, a
PostgreSQL cluster of its own, the Slack stand-in, the bot over HTTP) through one kind of fault and
then audits what the users and their consumers would see: every run ended, no event lost, no job
launched twice, exactly one final message per run, no secret in any log. `python -m tests.scenarios.chaos`
runs the long form; `tests/scenarios/test_chaos.py` runs the short form inside `make test`.
"""
