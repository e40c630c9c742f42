"""Per-conversation ordering and redelivery suppression.

Two messages of one conversation never run at once (the second waits for the
first's reply), while different conversations run concurrently.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["KeyedLocks", "RecentEvents"]


class KeyedLocks:
    """One `asyncio.Lock` per key, dropped again once nobody holds or waits."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        entry = self._locks.get(key)
        lock, users = entry if entry is not None else (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def users(self, key: str) -> int:
        """Tasks holding or waiting for `key`'s lock."""
        return self._locks.get(key, (None, 0))[1]

    def __len__(self) -> int:
        return len(self._locks)


class RecentEvents:
    """Remembers event IDs for `ttl` seconds (bounded) to drop redeliveries."""

    def __init__(self, *, ttl: float = 600.0, max_size: int = 50_000) -> None:
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._ttl = ttl
        self._max_size = max_size

    def first_time(self, event_id: str, now: float) -> bool:
        """True the first time `event_id` is seen within the window."""
        while self._seen:
            oldest_id, seen_at = next(iter(self._seen.items()))
            if seen_at > now - self._ttl and len(self._seen) < self._max_size:
                break
            del self._seen[oldest_id]
        if event_id in self._seen:
            return False
        self._seen[event_id] = now
        return True
