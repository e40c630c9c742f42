"""SQLite specifics: file layout, pragmas, one process per file."""

from __future__ import annotations

import sqlite3
import stat
import time
from pathlib import Path

import pytest

from chatbridge.core.ports.store import StoreError, StoreSettings
from chatbridge.stores import open_store
from chatbridge.stores.sqlite import SqliteStore
from tests.core.store.helpers import exchange, store_path
from tests.support.closing import Closing


async def test_new_file_is_private_wal_and_versioned(tmp_path: Path) -> None:
    path = store_path("sqlite", tmp_path)
    store = SqliteStore(path, max_entries=5)
    await store.open()
    await store.commit_exchange(exchange("hi"))
    await store.aclose()

    assert sorted(p.name for p in path.parent.iterdir()) == ["chatbridge.db"]  # no temp, wal, shm
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    header = path.read_bytes()[:100]
    assert header[18:20] == b"\x02\x02"  # WAL mode is recorded in the file itself
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        assert meta.keys() == {"schema_version", "store_id", "epoch"}
        assert meta["schema_version"] == "1"
        assert meta["epoch"] == "2"  # bumped at connect and before the closing checkpoint
        indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "ring_user_id" in indexes
    finally:
        db.close()


async def test_a_second_process_can_read_and_forget_while_the_first_serves(
    tmp_path: Path,
) -> None:
    path = store_path("sqlite", tmp_path)
    bot = SqliteStore(path, max_entries=5)
    await bot.open()
    await bot.commit_exchange(exchange("geheim"))
    admin = SqliteStore(path, max_entries=5)
    await admin.open()
    try:
        assert [e.user_message for e in await admin.ring("telegram:1", since=0)] == ["geheim"]
        await admin.forget("telegram:1")
        assert await bot.ring("telegram:1", since=0) == []
        assert await bot.load_session(exchange("x").session.key) is None
        # A reply the bot had in flight is dropped; a session started afterwards is kept.
        await bot.commit_exchange(exchange("geheim noch"))
        assert await admin.ring("telegram:1", since=0) == []
        await bot.commit_exchange(exchange("danach", ts=time.time() + 61))
        assert [e.user_message for e in await admin.ring("telegram:1", since=0)] == ["danach"]
    finally:
        await admin.aclose()
        await bot.aclose()
    for file in path.parent.iterdir():
        assert b"geheim" not in file.read_bytes(), file


async def test_open_store_backends(tmp_path: Path, closing: Closing) -> None:
    for backend, name in (("sqlite", "a.db"), ("json", "a.json")):
        store = await open_store(
            StoreSettings(backend=backend, path=tmp_path / name, url="", max_entries=3)
        )
        closing(store)
        await store.commit_exchange(exchange(backend))
        assert [e.user_message for e in await store.ring("telegram:1", since=0)] == [backend]
    nobody = "redis://127.0.0.1:1/0"  # redis is built in now; test_redis.py covers it
    with pytest.raises(StoreError, match=r"^redis://127\.0\.0\.1:1/0 is not reachable"):
        await open_store(
            StoreSettings(backend="redis", path=tmp_path / "r", url=nobody, max_entries=3)
        )
    with pytest.raises(StoreError, match="unknown store backend 'mongo'"):
        await open_store(StoreSettings(backend="mongo", path=tmp_path / "m", url="", max_entries=3))
