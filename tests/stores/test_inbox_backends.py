"""Inbox specifics of each backend: schema and migration, transactions, damage, layout."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from chatbridge.core.ports.store import DEDUPE_WINDOW, StoreCorrupt, StoreError
from chatbridge.stores.json import store as json_module
from tests.stores.helpers import (
    Stores,
    exchange,
    inbox_entry,
    redis_keys,
    redis_prefix,
    snapshot,
    store_path,
)
from tests.support.redis_server import redis_unavailable, redis_url

SECRET = "IBIS-0d3a-Bahnhofstraße-8"


def _sql(path: Path, *statements: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        rows: list[tuple[object, ...]] = []
        for statement in statements:
            rows = db.execute(statement).fetchall()
        return rows
    finally:
        db.close()


@pytest.fixture
async def raw() -> AsyncIterator[aioredis.Redis]:
    if reason := redis_unavailable():
        pytest.skip(reason)
    client = aioredis.from_url(redis_url(), decode_responses=True)
    yield client
    await client.aclose()


# -- all backends ---------------------------------------------------------------


async def test_a_failed_commit_leaves_its_entry_pending(
    backend: str, path: Path, monkeypatch: pytest.MonkeyPatch, raw_or_none: object, stores: Stores
) -> None:
    """Done is part of the exchange's transaction: no exchange, no done."""
    store = await stores(backend, path)
    entry = inbox_entry("telegram:1", at=time.time())
    await store.inbox_add(entry)
    if backend == "sqlite":
        trigger = "CREATE TRIGGER boom BEFORE INSERT ON ring BEGIN SELECT RAISE(ABORT, 'boom'); END"
        _sql(path, trigger)
    elif backend == "json":
        monkeypatch.setattr(json_module, "atomic_write", _disk_full)
    else:
        assert isinstance(raw_or_none, aioredis.Redis)
        await raw_or_none.set(f"{redis_prefix(path)}ring:telegram:1", "someone else's")
    with pytest.raises(StoreError):
        await store.commit_exchange(replace(exchange("q"), inbox_key="telegram:1"))
    monkeypatch.undo()
    assert await store.inbox_pending() == [entry]
    await store.aclose()
    again = await stores(backend, path)
    assert await again.inbox_pending() == [entry]


@pytest.fixture
async def raw_or_none(backend: str) -> AsyncIterator[aioredis.Redis | None]:
    if backend != "redis":
        yield None
        return
    client = aioredis.from_url(redis_url(), decode_responses=True)
    yield client
    await client.aclose()


def _disk_full(path: Path, data: bytes) -> None:
    raise StoreError(f"{path} could not be written (No space left on device); check disk space")


# -- sqlite -----------------------------------------------------------------------


async def test_sqlite_file_made_before_the_inbox_gets_it(tmp_path: Path, stores: Stores) -> None:
    path = store_path("sqlite", tmp_path)
    store = await stores("sqlite", path)
    await store.commit_exchange(exchange("kept"))
    await store.aclose()
    _sql(path, "DROP TABLE inbox", "PRAGMA wal_checkpoint(TRUNCATE)")
    assert not _sql(path, "SELECT name FROM sqlite_master WHERE name LIKE 'inbox%'")

    again = await stores("sqlite", path)  # vetting accepts the old file
    assert await again.inbox_pending() == []
    assert await again.inbox_add(inbox_entry("telegram:1")) is True
    assert [e.user_message for e in await again.ring("telegram:1", since=0)] == ["kept"]
    await again.aclose()
    names = {r[0] for r in _sql(path, "SELECT name FROM sqlite_master")}
    assert {"inbox", "inbox_done_at"} <= names


async def test_sqlite_prune_and_done_use_an_index(tmp_path: Path, stores: Stores) -> None:
    """Neither scans the table: the commit's UPDATE and the prune stay cheap."""
    path = store_path("sqlite", tmp_path)
    await (await stores("sqlite", path)).aclose()
    for sql in (
        "DELETE FROM inbox WHERE done_at < 1",
        "UPDATE inbox SET done_at = 1 WHERE key = 'k' AND done_at IS NULL",
        "DELETE FROM inbox WHERE key = 'k' AND done_at < 1",
    ):
        plan = " ".join(str(r[-1]) for r in _sql(path, f"EXPLAIN QUERY PLAN {sql}"))
        assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, (sql, plan)
        assert "SCAN inbox" not in plan, (sql, plan)


async def test_sqlite_old_markers_are_pruned(tmp_path: Path, stores: Stores) -> None:
    path = store_path("sqlite", tmp_path)
    store = await stores("sqlite", path)
    now = time.time()
    for i in range(3):
        await store.inbox_add(inbox_entry(f"telegram:{i}", at=now))
        await store.inbox_done(f"telegram:{i}")
    await store.aclose()
    later = await stores("sqlite", path)  # a process's first add prunes
    await later.inbox_add(inbox_entry("telegram:9", at=now + DEDUPE_WINDOW + 60))
    await later.aclose()
    assert _sql(path, "SELECT key FROM inbox") == [("telegram:9",)]


async def test_sqlite_malformed_row_is_skipped_and_reported_without_its_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, stores: Stores
) -> None:
    """Issue 17.3: a damaged row costs that row (it was StoreCorrupt for the whole read)."""
    path = store_path("sqlite", tmp_path)
    store = await stores("sqlite", path)
    await store.inbox_add(inbox_entry("telegram:1", SECRET))
    await store.inbox_add(inbox_entry("telegram:2", at=2000.0))
    _sql(path, f"UPDATE inbox SET message = '{{\"text\": \"{SECRET}\"' WHERE key = 'telegram:1'")
    assert [e.key for e in await store.inbox_pending()] == ["telegram:2"]
    await store.aclose()
    [report] = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert str(path) in report
    assert "'telegram:1'" in report
    assert SECRET not in caplog.text


# -- json ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "inbox",
    [
        {"inbox": {"k": 1}},
        {"inbox": [{"key": "k", "received_at": 1.0, "message": {"text": SECRET}, "sent": []}]},
        {"inbox": [{"key": "k", "received_at": "now", "message": {}, "sent": []}]},
        {"inbox_done": {"k": "yesterday"}},
    ],
)
async def test_json_bad_inbox_is_refused_without_its_text(
    tmp_path: Path, inbox: object, stores: Stores
) -> None:
    path = tmp_path / "memory.json"
    state = path.with_name("memory.json.state.json")
    state.write_text(json.dumps(inbox), encoding="utf-8")
    before = snapshot(tmp_path)
    with pytest.raises(StoreCorrupt) as err:
        await stores("json", path)
    assert str(state) in str(err.value)
    assert SECRET not in str(err.value)
    assert snapshot(tmp_path) == before


async def test_json_failed_write_is_undone_in_memory(tmp_path: Path, stores: Stores) -> None:
    """SQLite and Redis roll back in the server; json must undo its in-memory change."""
    store = await stores("json", store_path("json", tmp_path))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(json_module, "atomic_write", _disk_full)
        with pytest.raises(StoreError, match="No space left"):
            await store.inbox_add(inbox_entry("telegram:1"))
    assert await store.inbox_pending() == []
    assert await store.inbox_add(inbox_entry("telegram:1")) is True
    with pytest.MonkeyPatch.context() as m:
        m.setattr(json_module, "atomic_write", _disk_full)
        with pytest.raises(StoreError):
            await store.inbox_progress("telegram:1", sent=("m1",), answer="a")
        with pytest.raises(StoreError):
            await store.inbox_done("telegram:1")
        with pytest.raises(StoreError):
            await store.inbox_add_many([inbox_entry("telegram:2"), inbox_entry("telegram:3")])
    assert await store.inbox_pending() == [inbox_entry("telegram:1")]


async def test_json_state_written_before_the_inbox_still_opens(
    tmp_path: Path, stores: Stores
) -> None:
    path = tmp_path / "memory.json"
    state: dict[str, object] = {"sessions": {}, "usage": {}, "last_entry": None, "forgotten": {}}
    path.with_name("memory.json.state.json").write_text(json.dumps(state), encoding="utf-8")
    store = await stores("json", path)
    assert await store.inbox_pending() == []
    assert await store.inbox_add(inbox_entry("telegram:1")) is True


# -- redis ----------------------------------------------------------------------------


async def test_redis_inbox_layout_and_expiry(raw: aioredis.Redis, tmp_path: Path) -> None:
    from chatbridge.stores.redis import RedisStore

    prefix = redis_prefix(tmp_path)
    store = RedisStore(redis_url(), max_entries=3, prefix=prefix, ttl=600)
    await store.open()
    try:
        await store.inbox_add(inbox_entry("telegram:1", at=time.time(), sent=("m",)))
        keys = redis_keys(prefix)
        assert {k.removeprefix(prefix): type(v).__name__ for k, v in keys.items()} == {
            "inbox:telegram:1": "dict",
            "inbox-pending": "list",  # a zset, read as its members
            "inbox-seq": "str",
            "inbox-of:telegram:1::1": "list",  # the conversation's pending, a zset
        }
        fields = keys[f"{prefix}inbox:telegram:1"]
        assert isinstance(fields, dict)
        assert set(fields) == {"received_at", "seq", "message", "sent", "conversation"}
        for name in ("inbox:telegram:1", "inbox-pending", "inbox-seq", "inbox-of:telegram:1::1"):
            assert 590_000 < await raw.pttl(prefix + name) <= 600_000, name

        await store.inbox_done("telegram:1")
        done = f"{prefix}inbox-done:telegram:1"
        assert set(redis_keys(prefix)) == {done, f"{prefix}inbox-seq"}
        window = int(DEDUPE_WINDOW * 1000)
        assert window - 10_000 < await raw.pttl(done) <= window
        assert time.time() - 10 < float(await raw.get(done) or 0) <= time.time()
    finally:
        await store.aclose()
        await _purge(raw, prefix)


@pytest.mark.parametrize(
    ("name", "kind"),
    [("inbox:telegram:1", "list"), ("inbox-pending", "hash"), ("inbox-seq", "list"),
     ("inbox-done:telegram:1", "hash"), ("inbox-seq", "not-a-counter"),
     ("inbox-done:telegram:1", "not-a-time")],
)  # fmt: skip
async def test_redis_foreign_inbox_keys_refuse_the_add(
    raw: aioredis.Redis, tmp_path: Path, name: str, kind: str
) -> None:
    from chatbridge.stores.redis import RedisStore

    prefix = redis_prefix(tmp_path)
    key = prefix + name
    if kind == "list":
        await raw.rpush(key, "someone else's")
    elif kind == "hash":
        await raw.hset(key, "someone", "else")
    else:
        await raw.set(key, "x")
    planted = await raw.dump(key)
    store = RedisStore(redis_url(), max_entries=3, prefix=prefix)
    await store.open()
    try:
        with pytest.raises(StoreCorrupt, match="left untouched") as err:
            await store.inbox_add(inbox_entry("telegram:1"))
        assert repr(key) in str(err.value)
        assert set(redis_keys(prefix)) == {key}  # nothing else was written
        assert await raw.dump(key) == planted
    finally:
        await store.aclose()
        await _purge(raw, prefix)


async def test_redis_malformed_or_expired_entries(raw: aioredis.Redis, tmp_path: Path) -> None:
    from chatbridge.stores.redis import RedisStore

    prefix = redis_prefix(tmp_path)
    store = RedisStore(redis_url(), max_entries=3, prefix=prefix)
    await store.open()
    try:
        now = time.time()
        await store.inbox_add(inbox_entry("telegram:1", SECRET, at=now))
        await store.inbox_add(inbox_entry("telegram:2", at=now + 1))
        await raw.delete(f"{prefix}inbox:telegram:2")  # as if it expired
        assert [e.key for e in await store.inbox_pending()] == ["telegram:1"]
        assert await raw.zrange(f"{prefix}inbox-pending", 0, -1) == ["telegram:1"]

        # Issue 17.3: a malformed entry is skipped (it was StoreCorrupt for the whole read).
        await store.inbox_add(inbox_entry("telegram:3", at=now + 2))
        await raw.hset(f"{prefix}inbox:telegram:1", "message", f'{{"text": "{SECRET}"')
        assert [e.key for e in await store.inbox_pending()] == ["telegram:3"]
    finally:
        await store.aclose()
        await _purge(raw, prefix)


async def test_redis_works_after_the_script_cache_is_flushed(
    raw: aioredis.Redis, tmp_path: Path
) -> None:
    from chatbridge.stores.redis import RedisStore

    prefix = redis_prefix(tmp_path)
    store = RedisStore(redis_url(), max_entries=3, prefix=prefix)
    await store.open()
    try:
        await store.inbox_add(inbox_entry("telegram:1", at=time.time()))
        await raw.script_flush()
        await store.inbox_progress("telegram:1", sent=("m1",))
        await raw.script_flush()
        await store.commit_exchange(replace(exchange("q"), inbox_key="telegram:1"))
        assert await store.inbox_pending() == []
        assert await store.inbox_add(inbox_entry("telegram:1", at=time.time())) is False
    finally:
        await store.aclose()
        await _purge(raw, prefix)


async def _purge(raw: aioredis.Redis, prefix: str) -> None:
    keys = [k async for k in raw.scan_iter(match=f"{prefix}*")]
    if keys:
        await raw.delete(*keys)


# -- imports ----------------------------------------------------------------------------


def test_the_sqlite_backend_never_imports_redis(tmp_path: Path) -> None:
    code = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "import chatbridge.stores as s\n"
        "from chatbridge.core.ports.store import StoreSettings\n"
        "async def main():\n"
        "    st = await s.open_store(StoreSettings(backend='sqlite',"
        f" path=Path({str(tmp_path / 'a.db')!r}), url='', max_entries=3))\n"
        "    await st.aclose()\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m == 'redis' or m.startswith('redis.')"
        " or m.startswith('chatbridge.stores.redis')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
