"""In-process per-key locks: the turn of a conversation within one process."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from types import TracebackType

from chatbridge.core.ports.store import Lease

__all__ = ["KeyedLocks"]


class KeyedLocks:
    """One `asyncio.Lock` per key (FIFO), dropped again once nobody holds or waits.

    The in-process `ConversationLeases`: its leases have fence 0.
    """

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def hold(self, key: str) -> AbstractAsyncContextManager[Lease]:
        return _Hold(self._locks, key)

    async def is_held(self, key: str) -> bool:
        entry = self._locks.get(key)
        return entry is not None and entry[0].locked()

    def users(self, key: str) -> int:
        """Tasks holding or waiting for `key`'s lock."""
        return self._locks.get(key, (None, 0))[1]

    def __len__(self) -> int:
        return len(self._locks)


class _Hold(AbstractAsyncContextManager[Lease]):
    """`async with locks.hold(key)`: counted as a user of the key's lock from
    the start of the wait to the release (a cancelled wait included). A
    class, not a generator: every answer takes its conversation's turn."""

    __slots__ = ("_key", "_lock", "_locks")

    def __init__(self, locks: dict[str, tuple[asyncio.Lock, int]], key: str) -> None:
        self._locks, self._key = locks, key

    async def __aenter__(self) -> Lease:
        entry = self._locks.get(self._key)
        lock, users = entry if entry is not None else (asyncio.Lock(), 0)
        self._locks[self._key] = (lock, users + 1)
        self._lock = lock
        try:
            await lock.acquire()
        except BaseException:
            self._leave()
            raise
        return Lease(self._key)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._lock.release()
        finally:
            self._leave()

    def _leave(self) -> None:
        lock, users = self._locks[self._key]
        if users == 1:
            del self._locks[self._key]
        else:
            self._locks[self._key] = (lock, users - 1)
