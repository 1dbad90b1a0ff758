# Two commands matter: `make demo` (a real replay end to end) and `make test` (the whole suite).
# Both set themselves up: system packages, the virtualenv, Kafka jars, PostgreSQL.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
PYTEST_ARGS ?=
# `make test` runs the suite in this many pytest processes, a test file each at a time (ADR 0053).
TEST_WORKERS ?= 2

.PHONY: setup system class-archive lint format test test-fast demo chaos nightly bench clean

setup: system $(STAMP)

system:
	@scripts/bootstrap-system

# The local drivers' JVM class-data archive (ADR 0054): built once per Spark install, seconds off every start.
class-archive: $(STAMP)
	@$(PY) -m daemon.adapters.spark_class_archive || echo "(local drivers start without it)"

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -U pip setuptools wheel
	$(VENV)/bin/pip install -q -e '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

# Every tool runs even when an earlier one fails, so one pass shows every problem; any failure fails lint.
# import-linter enforces the layers ([tool.importlinter]), mypy the types ([tool.mypy]), both in pyproject.toml.
LINTERS := "ruff check ." "ruff format --check ." "lint-imports" "mypy"

lint: $(STAMP)
	@failed=(); for tool in $(LINTERS); do \
		echo "+ $$tool"; $(VENV)/bin/$$tool || failed+=("$$tool"); \
	done; \
	if (( $${#failed[@]} )); then printf 'lint failed: %s\n' "$${failed[@]}" >&2; exit 1; fi

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Real services: PostgreSQL is started here; the Kafka broker by the session fixture (scripts/local-kafka).
# A PostgreSQL cluster this target started is stopped again when pytest ends, however it ends.
# Two phases (docs/decisions/0053): the suite in TEST_WORKERS processes, then the `serial` tests
# (rates read off the broker's clock) alone on the machine; both always run, either fails the target.
test: setup lint class-archive
	@scripts/local-postgres status >/dev/null 2>&1 && up=yes || up=; \
	[ -n "$$up" ] || trap 'scripts/local-postgres stop >/dev/null 2>&1' EXIT; \
	trap 'exit 143' TERM; trap 'exit 130' INT; \
	export REPLAY_TEST_POSTGRES_URL="$$(scripts/local-postgres start | tail -n 1)"; rc=0; \
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile -m "not nightly and not serial" $(PYTEST_ARGS) || rc=$$?; \
	$(VENV)/bin/pytest -m "serial and not nightly" $(PYTEST_ARGS) || rc=$$?; \
	exit $$rc

# Pure and store tests only: no Spark job, no broker.
test-fast: setup
	REPLAY_TEST_POSTGRES_URL="$$(scripts/local-postgres start | tail -n 1)" \
		$(VENV)/bin/pytest -m "not kafka and not spark" $(PYTEST_ARGS)

demo: setup class-archive
	@scripts/demo

# The chaos suite (tests/scenarios/chaos): daemon kill -9s, broker and PostgreSQL restarts, Slack 429/500 bursts,
# a crowd of slash commands, two daemons, fuzzed input; one line per scenario and a summary. Its own
# broker and PostgreSQL cluster, loopback only, ~25 min. `make test` runs its short form
# (tests/scenarios/test_chaos.py). CHAOS_ARGS="--seed N --only kill,fuzz" replays or narrows a run.
CHAOS_ARGS ?=
chaos: setup
	$(PY) -m tests.scenarios.chaos $(CHAOS_ARGS)

# What is too long for `make test`: the chaos suite's long form and the tests marked `nightly` (a window
# about three times the job's heap, replayed and reconciled).
nightly: chaos
	REPLAY_TEST_POSTGRES_URL="$$(scripts/local-postgres start | tail -n 1)" \
		$(VENV)/bin/pytest -m nightly $(PYTEST_ARGS)

clean:
	-scripts/local-kafka stop
	rm -rf .state
