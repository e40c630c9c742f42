"""`forget` must leave the user's text unreadable in every file the store owns."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatbridge.core.models import Session, Turn
from tests.stores.helpers import Stores, exchange, raw_bytes

SECRET = "ZEBRA-7c1f-parcel-to-Karlstraße-12"
KEPT = "OTTER-kept-for-someone-else"


async def test_forget_leaves_no_readable_text(backend: str, path: Path, stores: Stores) -> None:
    if backend == "redis":
        pytest.skip("redis owns no files; test_redis.py checks every key instead")
    store = await stores(backend, path, max_entries=3)
    # More entries than max_entries, so some were trimmed before forget, plus a
    # session rewritten several times: old row versions must not linger either.
    for i in range(6):
        await store.commit_exchange(exchange(f"{SECRET} #{i}", ts=float(i), user="telegram:1"))
        await store.commit_exchange(exchange(f"{KEPT} #{i}", ts=float(i), user="discord:2"))
    turns = [Turn("user", SECRET)] * 50  # long enough to spill into overflow pages
    await store.save_session(Session("side", "telegram:1", 1.0, 2.0, turns), key="side")
    # The check must be able to fail: the text is on disk before forget.
    assert SECRET.encode() in raw_bytes(path.parent)

    await store.forget("telegram:1")
    assert SECRET.encode() not in raw_bytes(path.parent)  # already while open
    await store.aclose()

    everything = raw_bytes(path.parent)
    assert SECRET.encode() not in everything
    assert b"ZEBRA" not in everything
    assert b"telegram:1" not in everything  # nor who they were
    assert KEPT.encode() in everything

    again = await stores(backend, path, max_entries=3)
    assert await again.ring("telegram:1", since=-1) == []
    assert [e.user_message for e in await again.ring("discord:2", since=-1)] == [
        f"{KEPT} #3",
        f"{KEPT} #4",
        f"{KEPT} #5",
    ]
