"""In-process per-key locks: the turn of a conversation within one process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from chatbridge.core.ports.store import Lease

__all__ = ["KeyedLocks"]


class KeyedLocks:
    """One `asyncio.Lock` per key (FIFO), dropped again once nobody holds or waits.

    The in-process `ConversationLeases`: its leases have fence 0.
    """

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[Lease]:
        entry = self._locks.get(key)
        lock, users = entry if entry is not None else (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield Lease(key)
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    async def is_held(self, key: str) -> bool:
        entry = self._locks.get(key)
        return entry is not None and entry[0].locked()

    def users(self, key: str) -> int:
        """Tasks holding or waiting for `key`'s lock."""
        return self._locks.get(key, (None, 0))[1]

    def __len__(self) -> int:
        return len(self._locks)
