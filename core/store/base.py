"""The store Protocol every backend (sqlite, json, redis) implements.

Error tree::

    StoreError                 the store cannot be used; message names the file/URL
    └── StoreCorrupt           the file exists but cannot be read; it is left untouched
"""

from __future__ import annotations

from typing import Protocol

from core.models import Exchange, MemoryEntry, Session, Usage


class Store(Protocol):
    """Sessions, memory rings and usage counters.

    `commit_exchange` is the only write on the hot path and is atomic: after it
    returns, a killed process still finds the session, the ring entry and the
    usage on restart; before it returns, none of them.
    """

    async def load_session(self, key: str) -> Session | None: ...

    async def save_session(self, session: Session | None, *, key: str) -> None:
        """Replace the stored session for `key`; `None` deletes it (/new)."""
        ...

    async def commit_exchange(self, exchange: Exchange) -> None:
        """Store session + ring entry + usage at once, then trim the ring."""
        ...

    async def ring(self, user: str, *, since: float) -> list[MemoryEntry]:
        """The user's entries newer than `since`, oldest first, at most max_entries."""
        ...

    async def forget(self, user: str) -> None:
        """Erase the user's ring, sessions and usage so nothing stays readable."""
        ...

    async def usage(self, user: str, *, day: str) -> Usage: ...

    async def aclose(self) -> None:
        """Flush and release files/connections; safe to call twice."""
        ...


class StoreError(Exception):
    """The store cannot be opened or written; the message names the file or URL."""


class StoreCorrupt(StoreError):
    """The store file exists but cannot be read. It is never emptied or rewritten."""
