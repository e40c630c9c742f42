"""Per-conversation leases in Redis, so several replicas answer one conversation
one message at a time (`core.ports.store.ConversationLeases`), and cancel
notices over pub/sub (`CancelNotices`); `RedisStore.replication` gives both,
over the store's own connection, to the replicas' scheduler.

Keys (``P`` is the store's prefix)::

    P lease:{conversation}   STRING  redis-py `Lock` token of the holder; expires
                                     after `ttl` unless the holder extends it
    P fence:{conversation}   STRING  the fencing counter, INCRed by every new
                                     holder right after it acquired the lease

A holder extends its lease every ttl/3 while it holds it, so only a holder
that died (or stalled past the ttl) loses it, and its conversation is blocked
for at most `ttl`. A stalled holder that wakes up after another took over
still has the older fence: `RedisStore.commit_exchange` refuses its exchange
(`LeaseLost`), so it cannot overwrite what the new holder wrote.

    P cancel                 CHANNEL cancel mode: {"origin", "key", "at"} of
                                     each message accepted (`RedisNotices`)

Waiters of one process queue FIFO on a local lock first (`KeyedLocks`) and only
the head polls Redis, every `poll` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from redis.asyncio.lock import Lock
from redis.exceptions import LockError

from chatbridge.core.ports.store import Lease
from chatbridge.core.scheduling import KeyedLocks
from chatbridge.stores.redis._conn import RedisConnection

__all__ = [
    "RedisLeases",
    "RedisNotices",
    "fence_key",
    "lease_key",
]

log = logging.getLogger(__name__)

DEFAULT_POLL = 0.05


def lease_key(prefix: str, conversation: str) -> str:
    return f"{prefix}lease:{conversation}"


def fence_key(prefix: str, conversation: str) -> str:
    return f"{prefix}fence:{conversation}"


class RedisLeases:
    """`ConversationLeases` in the Redis server of `db` (under its key prefix).

    `hold` raises `StoreError` when Redis cannot be reached. Leaving the block
    releases the lease; a lease that was lost meanwhile is only logged.
    """

    def __init__(
        self,
        db: RedisConnection,
        *,
        ttl: float,
        poll: float = DEFAULT_POLL,
    ) -> None:
        if ttl <= 0 or poll <= 0:
            raise ValueError("the lease ttl and poll interval must be positive")
        self._db = db
        self.ttl = ttl
        self._poll = poll
        self._local = KeyedLocks()

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[Lease]:
        async with self._local.hold(key):
            lock, fence = await self._acquire(key)
            stop = asyncio.Event()
            keeper = asyncio.create_task(self._keep(lock, key, stop))
            try:
                yield Lease(key, fence)
            finally:
                # Told, not cancelled: redis-py can hang on a command
                # cancelled midway, so an extension under way completes.
                stop.set()
                await keeper
                await self._release(lock, key)

    async def is_held(self, key: str) -> bool:
        """True while a replica (this one or another) holds `key`'s lease."""
        db = self._db
        with db.errors("lease"):
            return bool(await db.client().exists(lease_key(db.prefix, key)))

    async def _acquire(self, key: str) -> tuple[Lock, int]:
        db = self._db
        client = db.client()
        lock = Lock(
            client,
            lease_key(db.prefix, key),
            timeout=self.ttl,
            sleep=self._poll,
            blocking=True,
            thread_local=False,  # one Lock object per hold; tasks share the thread
        )
        fkey = fence_key(db.prefix, key)
        with db.errors("lease"):
            await lock.acquire()
            try:
                async with client.pipeline(transaction=True) as tx:
                    tx.incr(fkey)
                    tx.pexpire(fkey, db.ttl_ms)
                    fence, _ = await tx.execute()
            except BaseException:
                with contextlib.suppress(LockError, OSError):
                    await lock.release()
                raise
        return lock, int(fence)

    async def _keep(self, lock: Lock, key: str, stop: asyncio.Event) -> None:
        """Extend the lease every ttl/3 until `stop` is set or the lease is lost."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.ttl / 3)
                return
            try:
                await lock.reacquire()
            except LockError:
                log.warning("the lease on %s expired while held; another replica may take it", key)
                return
            except Exception as exc:  # Redis away: retry; the fence guards the commit
                log.warning("could not extend the lease on %s: %s", key, exc)

    async def _release(self, lock: Lock, key: str) -> None:
        try:
            await lock.release()
        except LockError:
            log.warning("the lease on %s was lost before it was released", key)
        except Exception as exc:  # it expires by itself within ttl
            log.warning("could not release the lease on %s: %s", key, exc)


class RedisNotices:
    """`CancelNotices` over a Redis pub/sub channel of `db`'s prefix.

    A notice is lost if a replica is not subscribed when it is published (it
    then answers the older message too, as without cancel mode). Publishing
    failures are logged, never raised: the message is already in the inbox.
    """

    def __init__(self, db: RedisConnection) -> None:
        self._db = db
        self._origin = uuid.uuid4().hex  # our own notices come back; skip them
        self._channel = f"{db.prefix}cancel"

    async def publish(self, key: str, *, received_at: float) -> None:
        notice = json.dumps({"origin": self._origin, "key": key, "at": received_at})
        try:
            await self._db.client().publish(self._channel, notice)
        except Exception as exc:
            log.warning("could not tell the other replicas to cancel %s: %s", key, exc)

    @asynccontextmanager
    async def listen(self, on_notice: Callable[[str, float], None]) -> AsyncIterator[None]:
        pubsub = self._db.client().pubsub(ignore_subscribe_messages=True)
        with self._db.errors("subscribe"):
            await pubsub.subscribe(self._channel)
        reader = asyncio.create_task(self._read(pubsub, on_notice))
        try:
            yield
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            with contextlib.suppress(Exception):
                await pubsub.aclose()

    async def _read(self, pubsub: Any, on_notice: Callable[[str, float], None]) -> None:
        while True:
            try:
                message = await pubsub.get_message(timeout=1.0)
            except Exception as exc:  # Redis away: keep trying; cancels stay local meanwhile
                log.warning("cancel notices unavailable: %s", exc)
                await asyncio.sleep(1.0)
                continue
            if message is None or message.get("type") != "message":
                continue
            try:
                notice = json.loads(message["data"])
                if notice["origin"] != self._origin:
                    on_notice(str(notice["key"]), float(notice["at"]))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("ignored a malformed cancel notice: %s", exc)
