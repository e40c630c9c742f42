"""Suite-wide guards: no test, and no Python process a test starts, may reach
anything but this machine (`tests/support/network_guard.py`); and the
`testbot` factory and `closing`, which close what a test opened."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.support.closing import Closing
from tests.support.network_guard import child_pythonpath, guarded, guarded_getaddrinfo
from tests.support.paths import REPO
from tests.support.testbot import TestBots

# Every Python child inherits this (also those started without
# tests.support.cli.clean_env), so its sitecustomize installs the same guard.
os.environ["PYTHONPATH"] = child_pythonpath(REPO, os.environ.get("PYTHONPATH"))

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", guarded(_real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guarded(_real_connect_ex))
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo(_real_getaddrinfo))


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    """A test that runs the CLI in-process gets its `setup_logging` handler on
    the root logger, writing to that test's captured stderr; later tests must
    not log into that closed stream."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
async def testbot(tmp_path: Path) -> AsyncIterator[TestBots]:
    """`bot = await testbot(provider=…, settings=…)`: a `TestBot` on a real
    SQLite store in `tmp_path`, closed after the test however it ended
    (see `tests.support.testbot.TestBots`)."""
    bots = TestBots(tmp_path)
    yield bots
    await bots.aclose()


@pytest.fixture
async def closing() -> AsyncIterator[Closing]:
    """`thing = closing(await open_thing())`: `thing.aclose()` runs after the
    test however it ended (see `tests.support.closing`)."""
    things = Closing()
    yield things
    await things.aclose()


# Tests that start whole `chatbridge` processes (or a clone and a venv) cost
# seconds each: they are `long`. CI and the default run include them;
# `pytest -m "not long"` leaves them out while you work (README, Tests).
_LONG_PLACES = (
    "tests/scenarios/",
    "tests/deploy/",
    "tests/test_newcomer.py",
    "tests/replicas/test_run_replicas.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = Path(str(item.path)).relative_to(REPO).as_posix()
        if where.startswith(_LONG_PLACES):
            item.add_marker(pytest.mark.long)
