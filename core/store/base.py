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
        """Store session + ring entry + usage at once, then trim the ring.

        If `exchange.ring_user` was forgotten at or after
        `exchange.session.started_at` (a reply that was in flight during
        `forget`, whose session holds the forgotten history), nothing at all is
        written and the call returns normally. The check is part of the same
        transaction; a session started after the forget is stored as usual.
        """
        ...

    async def ring(self, user: str, *, since: float) -> list[MemoryEntry]:
        """The user's entries newer than `since`, oldest first, at most max_entries."""
        ...

    async def forget(self, user: str) -> None:
        """Erase the user's ring, sessions and usage so nothing stays readable.

        In the same transaction it records a tombstone: the SHA-256 hex of
        `user` (never the ID itself) and the wall-clock time of the forget
        (`time.time()`), which `commit_exchange` honours so the forget sticks.
        Session start times come from the engine's clock, which must therefore
        be wall time. Tombstones may be dropped after 7 days.
        """
        ...

    async def usage(self, user: str, *, day: str) -> Usage: ...

    async def aclose(self) -> None:
        """Flush and release files/connections; safe to call twice."""
        ...


class StoreError(Exception):
    """The store cannot be opened or written; the message names the file or URL."""


class StoreCorrupt(StoreError):
    """The store file exists but cannot be read. It is never emptied or rewritten."""
