"""Pacing platform calls: a token bucket whose waiting calls go by priority.

A reply's final text and its progress (edits, drafts, typing) share a
platform's budget; when calls must wait, the final ones go first, so under
load progress slows down rather than the answers people wait for. (aiolimiter,
which PTB's `AIORateLimiter` uses, serves waiters first come first served on
the event loop's clock; this one takes an injected clock, so pacing tests run
on a virtual one.)

Which phase a call belongs to comes from `chatbridge.core.ports.delivery_phase`,
set by the shared delivery code: platforms need no extra argument for it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable

from chatbridge.core.ports import Phase, delivery_phase

__all__ = ["FINAL", "PROGRESS", "RateBudget", "priority_now"]

FINAL, PROGRESS = 0, 1  # lower goes first
_WHOLE = 1 - 1e-9  # a token refilled up to float rounding is a token


def priority_now() -> int:
    """The priority of a call made now: final text before progress."""
    return PROGRESS if delivery_phase() is Phase.PROGRESS else FINAL


class RateBudget:
    """`rate` calls per second on average, bursts of up to `burst`.

    `take(priority)` returns once the call may be made; waiting calls are let
    through lowest priority value first, then in arrival order. A cancelled
    waiter gives its place up.
    """

    def __init__(
        self,
        rate: float,
        *,
        burst: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a budget needs a positive rate and a burst of at least 1")
        self._rate, self._burst = rate, burst
        self._monotonic, self._sleep = monotonic, sleep
        self._tokens = burst
        self._at = monotonic()
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._pump: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        return sum(1 for *_, future in self._waiting if not future.done())

    def _refill(self) -> None:
        now = self._monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now

    async def take(self, priority: int = FINAL) -> None:
        self._refill()
        if not self._waiting and self._tokens >= _WHOLE:
            self._tokens -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (priority, next(self._order), future))
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._let_through())
        await future

    async def _let_through(self) -> None:
        """Hand out tokens to waiters as they refill, best first."""
        while self._waiting:
            self._refill()
            while self._waiting and self._tokens >= _WHOLE:
                *_, future = heapq.heappop(self._waiting)
                if not future.done():
                    self._tokens -= 1
                    future.set_result(None)
            if self._waiting:
                await self._sleep(max(1 - self._tokens, 1e-6) / self._rate)
