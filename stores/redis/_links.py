"""Links between platform IDs in Redis (`core.links`), three hashes::

    P links           HASH  linked ID -> person key
    P link-codes      HASH  code SHA-256 -> "expires_at user"
    P link-attempts   HASH  ID -> "failures locked_until"

Each change reads the hashes it needs under WATCH, applies
`core.links.LinkBook`'s rules, and writes in MULTI/EXEC, retrying when another
client changed them meanwhile: links change rarely, so optimistic locking
never starves here, and one rule set serves every backend.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any, TypeVar

from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError
from redis.typing import EncodableT, FieldT

from chatbridge.core.links import CODE_TTL, LinkBook
from chatbridge.stores.redis._conn import BACKOFF, MAX_ATTEMPTS, RedisConnection

__all__ = ["RedisLinks"]

T = TypeVar("T")


class RedisLinks:
    """The six link methods, over the store's connection."""

    def __init__(self, db: RedisConnection) -> None:
        self._db = db

    def _link_keys(self) -> tuple[str, str, str]:
        p = self._db.prefix
        return f"{p}links", f"{p}link-codes", f"{p}link-attempts"

    async def _links_change(self, change: Callable[[LinkBook], T]) -> T:
        keys = self._link_keys()
        client = self._db.client()
        with self._db.errors("write"):
            for attempt in range(MAX_ATTEMPTS):
                async with client.pipeline(transaction=True) as tx:
                    try:
                        await tx.watch(*keys)
                        before = await _read_book(tx, keys)
                        after = LinkBook(
                            dict(before.person), dict(before.codes), dict(before.attempts)
                        )
                        result = change(after)
                        tx.multi()
                        _queue_diff(tx, keys, before, after)
                        await tx.execute()
                        return result
                    except WatchError:
                        pass
                await asyncio.sleep(random.uniform(0, BACKOFF * (attempt + 1)))
        raise self._db.busy("link")

    async def link_offer(self, user: str, code_hash: str, *, expires_at: float) -> None:
        now = expires_at - CODE_TTL  # codes all live CODE_TTL: older ones have expired
        await self._links_change(lambda b: b.offer(user, code_hash, expires_at, now))

    async def link_take(self, code_hash: str, *, now: float) -> str | None:
        return await self._links_change(lambda b: b.take(code_hash, now))

    async def link_attempt(self, user: str, *, now: float, failed: bool) -> float | None:
        return await self._links_change(lambda b: b.attempt(user, now, failed))

    async def link_join(self, first: str, second: str) -> str:
        return await self._links_change(lambda b: b.join(first, second))

    async def link_split(self, user: str) -> bool:
        return await self._links_change(lambda b: b.split(user))

    async def link_group(self, user: str) -> tuple[str, ...]:
        """One HGET for an unlinked ID (every message asks); the hash only when linked."""
        key = self._link_keys()[0]
        (mine,) = await self._db.read([(key, "hget", (user,))])
        if mine is None:
            return ()
        (person,) = await self._db.read([(key, "hgetall", ())])
        return LinkBook(person=dict(person)).group(user)


async def _read_book(tx: Pipeline, keys: tuple[str, str, str]) -> LinkBook:
    person: dict[str, str] = await tx.hgetall(keys[0])  # type: ignore[assignment]
    codes: dict[str, str] = await tx.hgetall(keys[1])  # type: ignore[assignment]
    attempts: dict[str, str] = await tx.hgetall(keys[2])  # type: ignore[assignment]
    book = LinkBook(person=dict(person))
    for hashed, raw in codes.items():
        exp, _, user = str(raw).partition(" ")
        try:
            book.codes[hashed] = (user, float(exp))
        except ValueError:
            continue  # damaged: the code is gone
    for user, raw in attempts.items():
        failures, _, locked = str(raw).partition(" ")
        try:
            book.attempts[user] = (int(failures), float(locked))
        except ValueError:
            continue
    return book


def _queue_diff(
    tx: Pipeline, keys: tuple[str, str, str], before: LinkBook, after: LinkBook
) -> None:
    pairs: tuple[tuple[str, dict[str, Any], dict[str, Any], Callable[[Any], str]], ...] = (
        (keys[0], before.person, after.person, lambda v: v),
        (keys[1], before.codes, after.codes, lambda v: f"{v[1]!r} {v[0]}"),
        (keys[2], before.attempts, after.attempts, lambda v: f"{v[0]} {v[1]!r}"),
    )
    for key, old, new, encode in pairs:
        gone = [k for k in old if k not in new]
        if gone:
            tx.hdel(key, *gone)
        changed: dict[FieldT, EncodableT] = {
            k: encode(v) for k, v in new.items() if old.get(k) != v
        }
        if changed:
            tx.hset(key, mapping=changed)
