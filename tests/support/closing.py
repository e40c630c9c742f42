"""The `closing` fixture: `store = closing(await open_store())` is closed when
the test ends, however it ended.

An `await store.aclose()` as the last line of a test is skipped whenever an
assert above it fails, and the open SQLite file, JSON lock, socket or server
then leaks into the next test. What a test opens by hand (a store under its
own engine, a platform, a client) goes through `closing` instead; the
`testbot` and `stores` factories do the same for what they make.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Protocol, TypeVar


class Closable(Protocol):
    async def aclose(self) -> None: ...


C = TypeVar("C", bound=Closable)


class Closing:
    """Closes what it was handed, newest first, every one even when one fails
    (`AsyncExitStack`). Closing early in the test, to restart, is fine where
    `aclose` is idempotent, as the stores' and platforms' are."""

    def __init__(self) -> None:
        self._stack = AsyncExitStack()

    def __call__(self, thing: C) -> C:
        self._stack.push_async_callback(thing.aclose)
        return thing

    async def aclose(self) -> None:
        await self._stack.aclose()
