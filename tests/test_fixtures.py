"""The factories behind the `testbot` and `stores` fixtures close everything
they opened, also what a test closed early itself, so a failed assert in the
middle of a test leaks no connection, lock or WAL."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatbridge.core.ports.store import StoreError
from tests.core.store.helpers import Stores, store_path
from tests.support.testbot import TestBots


def _wal(path: Path) -> Path:
    return path.with_name(f"{path.name}-wal")


async def test_testbots_close_every_bot_they_made(tmp_path: Path) -> None:
    bots = TestBots(tmp_path)
    first = await bots()
    assert "echo: Hallo" in await first.say("Hallo")
    second = await bots(tmp_path / "second")
    await second.aclose()  # closed early by the test: closing again is fine
    await bots.aclose()
    for bot in (first, second):
        with pytest.raises(StoreError, match="not open"):
            await bot.engine.store.ring("telegram:1", since=0)


@pytest.mark.parametrize("backend", ["sqlite", "json"])
async def test_stores_close_every_store_they_opened(tmp_path: Path, backend: str) -> None:
    stores = Stores()
    path = store_path(backend, tmp_path)
    first = await stores(backend, path)
    await first.aclose()
    again = await stores(backend, path)  # the JSON lock was free again
    await stores.aclose()
    with pytest.raises(StoreError, match="not open"):
        await again.ring("telegram:1", since=0)
    if backend == "sqlite":
        assert not _wal(path).exists(), "the last close did not checkpoint"
