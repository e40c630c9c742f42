"""`forget` also drops what the user sent that is not answered yet (every backend).

A pending inbox entry holds the user's message text. After `forget` it is
marked done: its text is gone from the store, it is not answered after a
restart, and a redelivery of the same event is not answered either. Other
users' entries, and the user's entries received after the forget, stay.
"""

from __future__ import annotations

import time
from pathlib import Path

from chatbridge.core.models import ChatKind
from tests.stores.helpers import (
    Stores,
    inbox_entry,
    raw_bytes,
    redis_keys,
    redis_prefix,
)

SECRET = "PAKET-7f3a-Lindenstraße-12 — 包裹"
OTHER = "another person parcel 4411"


def _everything(backend: str, path: Path) -> str:
    if backend == "redis":
        return repr(redis_keys(redis_prefix(path)))
    return raw_bytes(path.parent).decode("utf-8", errors="replace")


async def test_forget_drops_the_users_pending_entries_and_their_text(
    backend: str, path: Path, stores: Stores
) -> None:
    store = await stores(backend, path)
    now = time.time()
    private = inbox_entry("telegram:9001", f"{SECRET} private", at=now - 2, user="1")
    group = inbox_entry(
        "telegram:9002", f"{SECRET} group", at=now - 1, user="1", kind=ChatKind.GROUP
    )
    other = inbox_entry("telegram:9003", OTHER, at=now - 1, user="2")
    for entry in (private, group, other):
        assert await store.inbox_add(entry) is True
    await store.inbox_progress("telegram:9001", sent=("m1",), answer=f"{SECRET} half an answer")

    await store.forget("telegram:1")

    assert await store.inbox_pending() == [other]
    assert not await store.inbox_is_pending("telegram:9001")
    # The platform delivering the same event again does not bring it back.
    assert await store.inbox_add(private) is False
    if backend == "sqlite":  # forget scrubbed the WAL: nothing is left even while open
        assert SECRET not in _everything(backend, path)
    await store.aclose()
    held = _everything(backend, path)
    assert SECRET not in held
    assert OTHER in held


async def test_what_the_user_sends_after_the_forget_stays_pending(
    backend: str, path: Path, stores: Stores
) -> None:
    store = await stores(backend, path)
    later = inbox_entry("telegram:9005", "sent after the forget", at=time.time() + 60, user="1")
    assert await store.inbox_add(later) is True
    await store.forget("telegram:1")
    assert await store.inbox_pending() == [later]


async def test_forget_of_another_id_leaves_the_entry(
    backend: str, path: Path, stores: Stores
) -> None:
    """Matched by `platform:id`: the same number on another platform is another person."""
    store = await stores(backend, path)
    entry = inbox_entry("telegram:9006", "kept", at=time.time() - 1, user="1")
    assert await store.inbox_add(entry) is True
    await store.forget("slack:1")
    await store.forget("1")
    assert await store.inbox_pending() == [entry]
