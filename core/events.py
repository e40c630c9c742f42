"""Redelivery suppression: has this platform event been handled already?

`RecentEvents` (in process) is the default; `RedisEvents` shares the answer
between replicas on one Redis, so a webhook retry that lands on another
process is still answered once.
"""

from __future__ import annotations

from typing import Protocol

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from config import mask_url
from core.ordering import RecentEvents
from core.store.base import StoreError

__all__ = ["EventLog", "LocalEvents", "RedisEvents"]

WINDOW = 600.0  # platforms retry within minutes (Slack: 3 tries over ~5 min)


class EventLog(Protocol):
    async def first_time(self, event_id: str, now: float) -> bool:
        """True exactly once per event ID within the window."""
        ...

    async def aclose(self) -> None: ...


class LocalEvents:
    def __init__(self) -> None:
        self._recent = RecentEvents(ttl=WINDOW)

    async def first_time(self, event_id: str, now: float) -> bool:
        return self._recent.first_time(event_id, now)

    async def aclose(self) -> None:
        return None


class RedisEvents:
    """`SET key NX EX`: atomic across every replica sharing the server."""

    def __init__(self, url: str, *, prefix: str = "chatbridge:") -> None:
        self._client = aioredis.from_url(url, socket_connect_timeout=5, socket_timeout=10)
        self._prefix = f"{prefix}event:"
        self._shown = mask_url(url)

    async def first_time(self, event_id: str, now: float) -> bool:
        try:
            created = await self._client.set(self._prefix + event_id, b"1", nx=True, ex=int(WINDOW))
        except RedisError as exc:
            raise StoreError(f"{self._shown} is not reachable ({type(exc).__name__})") from exc
        return bool(created)

    async def aclose(self) -> None:
        await self._client.aclose()
