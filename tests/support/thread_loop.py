"""An event loop in a thread, so synchronous hypothesis tests can drive aiohttp.

Hypothesis runs its examples synchronously; a module-scoped `ThreadLoop`
keeps one server up across all of them and runs each request on it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["ThreadLoop"]

_T = TypeVar("_T")


class ThreadLoop:
    """A running event loop on a daemon thread; `close()` stops and closes it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Awaitable[_T], timeout: float = 30) -> _T:
        """`coro`'s result, waiting at most `timeout` seconds for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()
