"""SQLite specifics: file layout, pragmas, one process per file."""

from __future__ import annotations

import sqlite3
import stat
import time
from dataclasses import replace
from pathlib import Path

import pytest

from chatbridge.core.models import Turn
from chatbridge.core.ports.store import StoreError, StoreSettings
from chatbridge.stores import open_store
from chatbridge.stores.sqlite import SqliteStore
from tests.stores.helpers import exchange, store_path
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
        assert meta["schema_version"] == "3"
        assert meta["epoch"] == "2"  # bumped at connect and before the closing checkpoint
        # A user's ring and a session's turns are clustered by owner (`_layout`).
        tables = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type='table'"))
        assert "PRIMARY KEY(user, id)) WITHOUT ROWID" in tables["ring"]
        assert "PRIMARY KEY(key, id)) WITHOUT ROWID" in tables["turns"]
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


def _session_reads(store: SqliteStore) -> list[str]:
    """SELECTs on sessions and turns the store's connection runs from now on."""
    reads: list[str] = []

    def trace(sql: str) -> None:
        if sql.lstrip().upper().startswith("SELECT") and (" sessions " in sql or " turns " in sql):
            reads.append(sql)

    store._db.set_trace_callback(trace)  # type: ignore[union-attr]
    return reads


async def test_a_session_committed_here_is_served_without_reading_it_again(
    tmp_path: Path,
) -> None:
    path = store_path("sqlite", tmp_path)
    bot = SqliteStore(path, max_entries=5)
    await bot.open()
    first = exchange("Paket?")
    key = first.session.key
    await bot.commit_exchange(first)
    more = [Turn("user", "Und?"), Turn("assistant", "Mittwoch")]
    later = replace(first.session, last_active=1010.0, turns=[*first.session.turns, *more])
    await bot.commit_exchange(replace(first, session=later))
    reads = _session_reads(bot)
    kept = await bot.load_session(key)
    assert reads == []
    fresh = SqliteStore(path, max_entries=5)  # opening writes: bot's kept sessions go
    await fresh.open()
    try:
        assert kept == await fresh.load_session(key)
        assert kept is not None
        assert kept.turns == later.turns
    finally:
        await fresh.aclose()
        await bot.aclose()


async def test_a_session_another_connection_changed_is_read_again(
    tmp_path: Path, closing: Closing
) -> None:
    """The kept session is served only while no other connection committed
    (`data_version`): an admin's process, or any SQLite client."""
    path = store_path("sqlite", tmp_path)
    bot = closing(SqliteStore(path, max_entries=5))
    await bot.open()
    mine = exchange("Paket?")
    key = mine.session.key
    await bot.commit_exchange(mine)
    assert await bot.load_session(key) == mine.session
    other = SqliteStore(path, max_entries=5)
    await other.open()
    theirs = exchange("Rechnung?", ts=2000.0)
    await other.commit_exchange(theirs)
    await other.aclose()
    assert await bot.load_session(key) == theirs.session
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE turns SET content = 'geändert' WHERE role = 'user'")
    db.close()
    session = await bot.load_session(key)
    assert session is not None
    assert session.turns[0].content == "geändert"


async def test_a_session_read_with_a_damaged_turn_is_not_kept(tmp_path: Path) -> None:
    """A damaged turn is left out of the read, but its row still counts for the
    commit's trim: what follows is read again, never reassembled from memory."""
    path = store_path("sqlite", tmp_path)
    bot = SqliteStore(path, max_entries=5)
    await bot.open()
    start = exchange("u1")
    more = [Turn("user", "u2"), Turn("assistant", "a2")]
    start = replace(start, session=replace(start.session, turns=[*start.session.turns, *more]))
    await bot.commit_exchange(replace(start, added_turns=4))
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE turns SET content = CAST(x'ff' AS TEXT) WHERE content = 'answer to u1'")
    db.close()
    loaded = await bot.load_session(start.session.key)
    assert loaded is not None
    assert [t.content for t in loaded.turns] == ["u1", "u2", "a2"]
    loaded.turns += [Turn("user", "u3"), Turn("assistant", "a3")]
    await bot.commit_exchange(replace(start, session=loaded))
    again = await bot.load_session(start.session.key)
    fresh = SqliteStore(path, max_entries=5)  # opening writes: bot's kept sessions go
    await fresh.open()
    try:
        assert again == await fresh.load_session(start.session.key)
        assert again is not None
        assert [t.content for t in again.turns] == ["u2", "a2", "u3", "a3"]
    finally:
        await fresh.aclose()
        await bot.aclose()


async def test_a_commit_after_another_connection_wrote_keeps_nothing(
    tmp_path: Path, closing: Closing
) -> None:
    """Another connection changed the session between its read and the
    commit that appends to it: the commit's result is read from the file."""
    path = store_path("sqlite", tmp_path)
    bot = closing(SqliteStore(path, max_entries=5))
    await bot.open()
    first = exchange("Paket?")
    await bot.commit_exchange(first)
    loaded = await bot.load_session(first.session.key)
    assert loaded is not None
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE turns SET content = 'von nebenan' WHERE role = 'user'")
    db.close()
    loaded.turns += [Turn("user", "Und?"), Turn("assistant", "Mittwoch")]
    await bot.commit_exchange(replace(first, session=loaded))
    again = await bot.load_session(first.session.key)
    assert again is not None
    assert [t.content for t in again.turns] == [
        "von nebenan", "answer to Paket?", "Und?", "Mittwoch",
    ]  # fmt: skip


def _ring_reads(store: SqliteStore) -> list[str]:
    reads: list[str] = []
    store._db.set_trace_callback(  # type: ignore[union-attr]
        lambda sql: reads.append(sql) if " FROM ring " in sql else None
    )
    return reads


async def test_a_ring_committed_here_is_served_without_reading_it_again(tmp_path: Path) -> None:
    path = store_path("sqlite", tmp_path)
    bot = SqliteStore(path, max_entries=3)
    await bot.open()
    assert await bot.ring("telegram:1", since=0) == []
    for n in range(5):
        await bot.commit_exchange(exchange(f"Frage {n}", ts=1000.0 + n))
    reads = _ring_reads(bot)
    kept = await bot.ring("telegram:1", since=1002.5)
    assert reads == []
    assert [e.user_message for e in kept] == ["Frage 3", "Frage 4"]
    whole = await bot.ring("telegram:1", since=0)
    assert [e.user_message for e in whole] == ["Frage 2", "Frage 3", "Frage 4"]
    fresh = SqliteStore(path, max_entries=3)  # opening writes: bot's kept rings go
    await fresh.open()
    try:
        assert kept == await fresh.ring("telegram:1", since=1002.5)
        assert await bot.ring("telegram:1", since=0) == await fresh.ring("telegram:1", since=0)
    finally:
        await fresh.aclose()
        await bot.aclose()


async def test_a_ring_another_connection_changed_is_read_again(
    tmp_path: Path, closing: Closing
) -> None:
    path = store_path("sqlite", tmp_path)
    bot = closing(SqliteStore(path, max_entries=5))
    await bot.open()
    await bot.commit_exchange(exchange("Paket?"))
    assert [e.user_message for e in await bot.ring("telegram:1", since=0)] == ["Paket?"]
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE ring SET user_message = 'von nebenan'")
    db.close()
    assert [e.user_message for e in await bot.ring("telegram:1", since=0)] == ["von nebenan"]


async def test_a_ring_longer_than_max_entries_is_cut_as_the_query_cuts_it(
    tmp_path: Path, closing: Closing
) -> None:
    """A lowered `max_entries`: until the next commit trims the file, the
    newest `max_entries` newer than `since` are read, as before."""
    path = store_path("sqlite", tmp_path)
    wide = SqliteStore(path, max_entries=5)
    await wide.open()
    for n in range(5):
        await wide.commit_exchange(exchange(f"Frage {n}", ts=1000.0 + n))
    await wide.aclose()
    narrow = closing(SqliteStore(path, max_entries=3))
    await narrow.open()
    for _ in range(2):  # the second time from memory, if it were kept
        ring = await narrow.ring("telegram:1", since=1000.5)
        assert [e.user_message for e in ring] == ["Frage 2", "Frage 3", "Frage 4"]


async def test_a_ring_read_with_a_damaged_entry_is_not_kept(
    tmp_path: Path, closing: Closing
) -> None:
    """The damaged entry is left out of the read but still counts for the
    commit's trim: what follows is read again, never reassembled from memory."""
    path = store_path("sqlite", tmp_path)
    bot = closing(SqliteStore(path, max_entries=3))
    await bot.open()
    for n in range(3):
        await bot.commit_exchange(exchange(f"Frage {n}", ts=1000.0 + n))
    db = sqlite3.connect(path)
    with db:
        db.execute(
            "UPDATE ring SET user_message = CAST(x'ff' AS TEXT) WHERE user_message = 'Frage 1'"
        )
    db.close()
    ring = await bot.ring("telegram:1", since=0)
    assert [e.user_message for e in ring] == ["Frage 0", "Frage 2"]
    await bot.commit_exchange(exchange("Frage 3", ts=1003.0))
    ring = await bot.ring("telegram:1", since=0)
    assert [e.user_message for e in ring] == ["Frage 2", "Frage 3"]


async def test_a_reply_in_flight_during_forget_stays_out_of_the_kept_ring(
    tmp_path: Path, closing: Closing
) -> None:
    path = store_path("sqlite", tmp_path)
    bot = closing(SqliteStore(path, max_entries=5))
    await bot.open()
    await bot.commit_exchange(exchange("geheim"))
    await bot.forget("telegram:1")
    assert await bot.ring("telegram:1", since=0) == []
    await bot.commit_exchange(exchange("geheim noch"))  # its session began before the forget
    assert await bot.ring("telegram:1", since=0) == []
    assert await bot.load_session(exchange("x").session.key) is None


async def test_the_turns_trim_runs_only_when_it_has_turns_to_drop(tmp_path: Path) -> None:
    path = store_path("sqlite", tmp_path)
    bot = SqliteStore(path, max_entries=5)
    await bot.open()
    first = exchange("u0")
    await bot.commit_exchange(first)
    statements: list[str] = []
    bot._db.set_trace_callback(statements.append)  # type: ignore[union-attr]
    grown = replace(
        first.session, turns=[*first.session.turns, Turn("user", "u1"), Turn("assistant", "a1")]
    )
    await bot.commit_exchange(replace(first, session=grown))
    assert not [s for s in statements if s.startswith("DELETE FROM turns")]
    # The oldest exchange dropped (as `append_turns` drops it past max_turns).
    moved = replace(grown, turns=[*grown.turns[2:], Turn("user", "u2"), Turn("assistant", "a2")])
    await bot.commit_exchange(replace(first, session=moved))
    assert [s for s in statements if s.strip().startswith("DELETE FROM turns")]
    fresh = SqliteStore(path, max_entries=5)
    await fresh.open()
    try:
        stored = await fresh.load_session(first.session.key)
        assert stored is not None
        assert [t.content for t in stored.turns] == ["u1", "a1", "u2", "a2"]
    finally:
        await fresh.aclose()
        await bot.aclose()
