"""Per-conversation ordering, and cancel notices across replicas.

Two messages of one conversation never run at once (the second waits for the
first's reply), while different conversations run concurrently. Within one
process `KeyedLocks` does it; several replicas sharing Redis take a lease
there as well (`core.store._redis_lease.RedisLeases`), both behind
`ConversationLeases`. A platform's redelivery of an event is refused by
the inbox (`Inbox.inbox_add`, up to `DEDUPE_WINDOW` after it was answered),
not here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "CancelNotices",
    "ConversationLeases",
    "KeyedLocks",
    "Lease",
    "LocalNotices",
]


@dataclass(frozen=True, slots=True)
class Lease:
    """A conversation's turn, held. `fence` is the fencing ticket a store commit
    checks (it grows with every new holder); 0 for an in-process lock."""

    key: str
    fence: int = 0


class ConversationLeases(Protocol):
    """Grants one holder at a time per conversation key, FIFO within a process."""

    def hold(self, key: str) -> AbstractAsyncContextManager[Lease]:
        """Wait for `key`'s turn and keep it (alive, for a lease with a timeout)
        until the block is left."""
        ...

    def users(self, key: str) -> int:
        """Tasks of this process holding or waiting for `key`."""
        ...


class KeyedLocks:
    """One `asyncio.Lock` per key, dropped again once nobody holds or waits.

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

    def users(self, key: str) -> int:
        """Tasks holding or waiting for `key`'s lock."""
        return self._locks.get(key, (None, 0))[1]

    def __len__(self) -> int:
        return len(self._locks)


class CancelNotices(Protocol):
    """Cancel mode across replicas: tells the others that a conversation got a
    newer message, so they stop (or drop) their reply to an older one."""

    async def publish(self, key: str, *, received_at: float) -> None:
        """Announce a message for conversation `key` received at `received_at`."""
        ...

    def listen(self, on_notice: Callable[[str, float], None]) -> AbstractAsyncContextManager[None]:
        """Call `on_notice(key, received_at)` for other replicas' notices while
        the block runs (subscribed once it is entered)."""
        ...


class LocalNotices:
    """`CancelNotices` for one process: the engine cancels locally, nothing to tell."""

    async def publish(self, key: str, *, received_at: float) -> None:
        return None

    @asynccontextmanager
    async def listen(self, on_notice: Callable[[str, float], None]) -> AsyncIterator[None]:
        yield
