"""`forget` sticks: a reply that was in flight during it cannot write the user back.

Every backend records a tombstone (SHA-256 of the user ID, wall-clock time of
the forget) and `commit_exchange` writes nothing for a session that started at
or before it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import pytest

from chatbridge.core.models import Exchange, Session, Turn, Usage
from chatbridge.stores._codec import user_hash
from tests.stores.helpers import (
    AnyStore,
    Stores,
    exchange,
    raw_bytes,
    redis_keys,
    redis_prefix,
)

USER = "telegram:987654321"
OTHER = "discord:2"
SECRET = "QUAGGA-5e2d-in-flight-Rosenweg-9"
DAY = "2025-04-05"
T0 = 1000.0  # when the in-flight session started: long before any forget here
WEEK = 7 * 24 * 3600.0


def _in_flight(first: Exchange, text: str) -> Exchange:
    """The next exchange of `first`'s session: its turns carry the earlier text."""
    session = first.session
    turns = [*session.turns, Turn("user", text), Turn("assistant", f"answer to {text}")]
    later = replace(session, last_active=session.last_active + 30.0, turns=turns)
    entry = replace(first.entry, timestamp=later.last_active, user_message=text)
    return Exchange(first.ring_user, later, entry, first.usage, first.day, added_turns=2)


def _everything(backend: str, path: Path) -> str:
    """What the store holds, raw: every file's bytes, or every redis key and value."""
    if backend == "redis":
        return repr(redis_keys(redis_prefix(path)))
    return raw_bytes(path.parent).decode("utf-8", errors="replace")


async def test_a_reply_in_flight_during_forget_writes_nothing(
    backend: str, path: Path, stores: Stores
) -> None:
    store = await stores(backend, path)
    first = exchange(SECRET, user=USER, ts=T0 + 60.0, started=T0, day=DAY)
    await store.commit_exchange(first)
    await store.commit_exchange(exchange("kept", user=OTHER, ts=T0 + 60.0, started=T0, day=DAY))
    await store.forget(USER)

    late = _in_flight(first, "and one more thing")
    assert late.session.started_at == T0
    assert SECRET in late.session.turns[0].content  # the forgotten history rides along
    await store.commit_exchange(late)

    assert await store.ring(USER, since=-1) == []
    assert await store.load_session(first.session.key) is None
    assert await store.usage(USER, day=DAY) == Usage()
    assert [e.user_message for e in await store.ring(OTHER, since=-1)] == ["kept"]
    await store.aclose()

    everything = _everything(backend, path)
    assert SECRET not in everything
    assert "QUAGGA" not in everything
    assert "and one more thing" not in everything
    assert USER not in everything
    assert "kept" in everything


async def test_a_session_started_after_the_forget_is_stored(store: AnyStore) -> None:
    await store.commit_exchange(exchange(SECRET, user=USER, ts=T0 + 60.0, started=T0, day=DAY))
    await store.forget(USER)

    fresh = exchange("new start", user=USER, started=time.time() + 1, day=DAY, tokens=(2, 4))
    await store.commit_exchange(fresh)

    assert [e.user_message for e in await store.ring(USER, since=-1)] == ["new start"]
    assert await store.load_session(fresh.session.key) == fresh.session
    assert await store.usage(USER, day=DAY) == Usage(2, 4)


async def test_other_users_commits_are_unaffected(store: AnyStore) -> None:
    await store.forget(USER)
    await store.forget("telegram:98765432")  # a prefix of USER's digits: no collision
    for i in range(3):
        await store.commit_exchange(exchange(f"o{i}", user=OTHER, ts=T0 + i, day=DAY))
    await store.commit_exchange(exchange("u", user="telegram:9876543210", ts=T0, day=DAY))

    assert [e.user_message for e in await store.ring(OTHER, since=-1)] == ["o0", "o1", "o2"]
    assert await store.usage(OTHER, day=DAY) == Usage(9, 15)
    assert await store.load_session(f"{OTHER}:chat") is not None
    assert [e.user_message for e in await store.ring("telegram:9876543210", since=-1)] == ["u"]


async def test_the_tombstone_names_the_user_only_by_hash(
    backend: str, path: Path, stores: Stores
) -> None:
    store = await stores(backend, path)
    await store.commit_exchange(exchange(SECRET, user=USER, day=DAY))
    before = time.time()
    await store.forget(USER)
    after = time.time()
    await store.aclose()

    digest = user_hash(USER)
    assert len(digest) == 64
    if backend == "sqlite":
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT user_hash, at FROM forgotten").fetchall()
        finally:
            db.close()
    elif backend == "json":
        state = json.loads(path.with_name(f"{path.name}.state.json").read_text("utf-8"))
        rows = list(state["forgotten"].items())
    else:
        prefix = redis_prefix(path)
        keys = redis_keys(prefix)
        rows = [
            (k.removeprefix(f"{prefix}forgotten:"), float(str(v)))
            for k, v in keys.items()
            if k.startswith(f"{prefix}forgotten:")
        ]
    assert [h for h, _ in rows] == [digest]
    assert before <= rows[0][1] <= after  # wall-clock time of the forget
    assert USER not in _everything(backend, path)
    assert "987654321" not in _everything(backend, path)


async def test_the_tombstone_outlives_the_instance_that_wrote_it(
    backend: str, path: Path, stores: Stores
) -> None:
    """An admin's `memory forget` in another process; json reopens instead (one process)."""
    bot = await stores(backend, path)
    first = exchange(SECRET, user=USER, ts=T0 + 60.0, started=T0, day=DAY)
    await bot.commit_exchange(first)
    if backend == "json":
        await bot.aclose()
    admin = await stores(backend, path)
    await admin.forget(USER)
    await admin.aclose()
    if backend == "json":
        bot = await stores(backend, path)

    await bot.commit_exchange(_in_flight(first, "late"))
    assert await bot.ring(USER, since=-1) == []
    assert await bot.load_session(first.session.key) is None
    await bot.aclose()
    assert SECRET not in _everything(backend, path)


async def test_forgetting_again_keeps_one_tombstone(store: AnyStore) -> None:
    await store.forget(USER)
    await store.forget(USER)
    await store.commit_exchange(exchange(SECRET, user=USER, started=T0))
    assert await store.ring(USER, since=-1) == []
    late = exchange("later", user=USER, started=time.time() + 1)
    await store.commit_exchange(late)
    assert [e.user_message for e in await store.ring(USER, since=-1)] == ["later"]


async def test_tombstones_older_than_a_week_are_pruned(
    backend: str, path: Path, monkeypatch: pytest.MonkeyPatch, stores: Stores
) -> None:
    if backend == "redis":
        pytest.skip("redis expires tombstones itself; test_redis.py checks the expiry")
    store = await stores(backend, path)
    real = time.time()
    with monkeypatch.context() as m:  # sqlite and json forget without awaiting anything
        m.setattr(time, "time", lambda: real - WEEK - 60)
        await store.forget(USER)
    await store.commit_exchange(exchange("dropped", user=USER, started=T0))
    assert await store.ring(USER, since=-1) == []

    await store.forget(OTHER)  # prunes USER's old tombstone
    await store.commit_exchange(exchange("stored", user=USER, started=T0))
    assert [e.user_message for e in await store.ring(USER, since=-1)] == ["stored"]


async def test_sqlite_file_without_the_tombstone_table_gets_it(
    tmp_path: Path, stores: Stores
) -> None:
    """Files made before tombstones existed (same schema version) still open."""
    path = tmp_path / "chatbridge.db"
    store = await stores("sqlite", path)
    await store.commit_exchange(exchange(SECRET, user=USER, started=T0))
    await store.aclose()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DROP TABLE forgotten")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()

    again = await stores("sqlite", path)
    await again.forget(USER)
    await again.commit_exchange(exchange(SECRET, user=USER, started=T0))
    assert await again.ring(USER, since=-1) == []


async def test_json_state_without_tombstones_still_opens(tmp_path: Path, stores: Stores) -> None:
    path = tmp_path / "memory.json"
    session = {"user": USER, "started_at": T0, "last_active": T0, "turns": []}
    state = {"sessions": {"k": session}, "usage": {}, "last_entry": None}
    path.with_name("memory.json.state.json").write_text(json.dumps(state), encoding="utf-8")
    store = await stores("json", path)
    assert await store.load_session("k") == Session("k", USER, T0, T0)
    await store.forget(USER)
    await store.commit_exchange(exchange(SECRET, user=USER, started=T0))
    assert await store.ring(USER, since=-1) == []
