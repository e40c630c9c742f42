# Two commands on a fresh machine, also where the system Python refuses a
# global `pip install` (Debian's "externally managed" environment):
#   make setup   # creates .venv and installs chatbridge with its dev tools
#   make test    # the whole suite, as CI runs it
VENV ?= .venv
PYTHON ?= python3

.PHONY: setup test lint

setup:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'

test:
	$(VENV)/bin/python -m pytest

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
