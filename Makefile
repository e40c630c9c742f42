# Two commands on a fresh machine, also where the system Python refuses a
# global `pip install` (Debian's "externally managed" environment):
#   make chat    # sets up .venv if needed, then `chatbridge chat` in this terminal
#   make test    # sets up .venv if needed, then the whole suite, as CI runs it
# `make setup` only sets up; it is redone when pyproject.toml changes.
# ARGS passes arguments on: `make chat ARGS='--user telegram:42'`, `make test ARGS='-n 0 tests/core'`.
VENV ?= .venv
PYTHON ?= python3
INSTALLED := $(VENV)/.installed

.PHONY: setup chat test lint

setup: $(INSTALLED)

$(INSTALLED): pyproject.toml
	@echo "setting up $(VENV): chatbridge with its dev tools (a minute on the first run)" >&2
	@$(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/python -m pip install --quiet --upgrade pip
	@$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	@touch $@

chat: setup
	@$(VENV)/bin/chatbridge chat $(ARGS)

test: setup
	$(VENV)/bin/python -m pytest $(ARGS)

# The same checks as CI (scripts/lint): ruff check, ruff format --check, mypy --strict.
lint: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" scripts/lint
