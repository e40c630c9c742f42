"""The `Store` contract, run against every backend."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from chatbridge.core.models import MemoryEntry, Session, Turn, Usage
from chatbridge.core.ports.store import StoreError
from tests.stores.helpers import AnyStore, Stores, exchange, new_store, opened


async def test_unknown_session_is_none(store: AnyStore) -> None:
    assert await store.load_session("nope") is None


async def test_session_round_trip_keeps_turns(store: AnyStore) -> None:
    turns = [Turn("user", "Grüße — 你好"), Turn("assistant", 'quote " and \n newline')]
    session = Session("tg:1::1", "telegram:1", 10.5, 20.25, turns)
    await store.save_session(session, key="tg:1::1")
    session.turns.append(Turn("user", "not saved"))  # the store must have taken a copy

    loaded = await store.load_session("tg:1::1")
    assert loaded == Session("tg:1::1", "telegram:1", 10.5, 20.25, turns[:2])
    assert loaded is not None
    loaded.turns.clear()
    assert (await store.load_session("tg:1::1")) == Session(
        "tg:1::1", "telegram:1", 10.5, 20.25, turns[:2]
    )


async def test_save_none_deletes(store: AnyStore) -> None:
    await store.save_session(Session("k", "telegram:1", 1.0, 2.0), key="k")
    await store.save_session(None, key="k")
    assert await store.load_session("k") is None
    await store.save_session(None, key="never-existed")  # a no-op, not an error


async def test_commit_is_found_by_a_new_instance(backend: str, path: Path, stores: Stores) -> None:
    first = await stores(backend, path)
    ex = exchange("where is my parcel", tokens=(7, 11))
    await first.commit_exchange(ex)
    await first.aclose()

    second = await opened(backend, path)
    try:
        assert await second.load_session(ex.session.key) == ex.session
        assert await second.ring("telegram:1", since=0) == [ex.entry]
        assert await second.usage("telegram:1", day=ex.day) == Usage(7, 11)
    finally:
        await second.aclose()


async def test_ring_is_oldest_first_trimmed_and_filtered(
    backend: str, path: Path, stores: Stores
) -> None:
    store = await stores(backend, path, max_entries=5)
    for i in range(1, 9):
        await store.commit_exchange(exchange(f"m{i}", ts=float(i)))

    assert [e.user_message for e in await store.ring("telegram:1", since=0)] == [
        "m4",
        "m5",
        "m6",
        "m7",
        "m8",
    ]
    assert [e.timestamp for e in await store.ring("telegram:1", since=6.0)] == [7.0, 8.0]
    assert await store.ring("telegram:1", since=8.0) == []
    await store.aclose()

    again = await stores(backend, path, max_entries=5)  # trimming was persisted, not a view
    assert len(await again.ring("telegram:1", since=0)) == 5


async def test_usage_adds_up_per_day(store: AnyStore) -> None:
    await store.commit_exchange(exchange("a", tokens=(1, 2), day="2025-04-05"))
    await store.commit_exchange(exchange("b", tokens=(10, 20), day="2025-04-05"))
    await store.commit_exchange(exchange("c", tokens=(100, 200), day="2025-04-06"))
    assert await store.usage("telegram:1", day="2025-04-05") == Usage(11, 22)
    assert await store.usage("telegram:1", day="2025-04-06") == Usage(100, 200)
    assert await store.usage("telegram:1", day="2025-04-07") == Usage()


async def test_users_are_isolated(store: AnyStore) -> None:
    await store.commit_exchange(exchange("alice's", user="telegram:1", tokens=(1, 1)))
    await store.commit_exchange(exchange("bob's", user="discord:2", tokens=(5, 5)))
    assert [e.user_message for e in await store.ring("telegram:1", since=0)] == ["alice's"]
    assert [e.user_message for e in await store.ring("discord:2", since=0)] == ["bob's"]
    assert await store.usage("discord:2", day="2025-04-05") == Usage(5, 5)


async def test_entry_is_filed_under_ring_user(store: AnyStore) -> None:
    ex = exchange("hi", user="telegram:1")
    await store.commit_exchange(replace(ex, ring_user="alice", entry=replace(ex.entry, user="x")))
    assert [e.user for e in await store.ring("alice", since=0)] == ["alice"]
    assert await store.ring("x", since=0) == []
    assert await store.usage("alice", day=ex.day) == Usage(3, 5)


async def test_forget_erases_only_that_user(store: AnyStore) -> None:
    for user in ("telegram:1", "discord:2"):
        await store.commit_exchange(exchange("hello", user=user, key=f"{user}:a"))
        await store.save_session(Session(f"{user}:b", user, 1.0, 2.0), key=f"{user}:b")
    await store.forget("telegram:1")

    assert await store.ring("telegram:1", since=0) == []
    assert await store.load_session("telegram:1:a") is None
    assert await store.load_session("telegram:1:b") is None
    assert await store.usage("telegram:1", day="2025-04-05") == Usage()
    assert len(await store.ring("discord:2", since=0)) == 1
    assert await store.load_session("discord:2:a") is not None
    assert await store.load_session("discord:2:b") is not None
    assert await store.usage("discord:2", day="2025-04-05") == Usage(3, 5)


async def test_user_without_owner_sees_nothing(store: AnyStore) -> None:
    ex = exchange("orphan")
    await store.commit_exchange(replace(ex, ring_user=""))
    assert await store.ring("", since=0) == []


async def test_closed_store_refuses_and_close_is_idempotent(store: AnyStore) -> None:
    await store.aclose()
    await store.aclose()
    with pytest.raises(StoreError, match="not open"):
        await store.ring("telegram:1", since=0)


def test_max_entries_must_be_positive(backend: str, path: Path) -> None:
    with pytest.raises(ValueError, match="max_entries"):
        new_store(backend, path, max_entries=0)


async def test_entries_round_trip_exactly(store: AnyStore) -> None:
    entry = MemoryEntry(1743854580.123456, "ä\u2028b", "s\x00t", "n", "", "telegram:1", "tg:-100")
    ex = exchange("x")
    await store.commit_exchange(replace(ex, entry=entry))
    assert await store.ring("telegram:1", since=0) == [entry]


async def test_a_commit_adding_every_turn_rewrites_the_session(store: AnyStore) -> None:
    """`added_turns == len(turns)`: the session's head changed (a trimmed
    session's bridged head), so the stored turns are replaced, not appended to."""
    first = exchange("eins", ts=1000.0)
    await store.commit_exchange(first)
    turns = [Turn("user", "<block> zwei"), Turn("assistant", "a2"), Turn("user", "drei")]
    turns.append(Turn("assistant", "a3"))
    session = replace(first.session, turns=turns, last_active=1060.0)
    await store.commit_exchange(replace(first, session=session, added_turns=len(turns)))
    loaded = await store.load_session(first.session.key)
    assert loaded is not None
    assert loaded.turns == turns


async def test_async_with_opens_and_closes_and_a_second_open_changes_nothing(
    backend: str, path: Path
) -> None:
    """The contract's `async with store:` opens the store and closes it on the
    way out; `open` on an open store is harmless (a caller that opened it
    before entering). Only the store shared by replicas gives leases."""
    async with new_store(backend, path) as store:
        await store.open()
        await store.commit_exchange(exchange("eins"))
        assert (store.replication(lease_ttl=5.0) is not None) == (backend == "redis")
    with pytest.raises(StoreError):
        await store.ring("telegram:1", since=0)  # closed on the way out
    async with new_store(backend, path) as again:
        assert [e.user_message for e in await again.ring("telegram:1", since=0)] == ["eins"]
