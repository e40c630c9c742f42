"""The Redis store: several replicas share sessions, rings, the inbox, limits,
and take turns with its conversation leases and cancel notices.

Same shape as every backend package: `open_store(settings)` here; the store
class in `store.py` (lifecycle, sessions and memory, the exchange's one
MULTI/EXEC), which composes the parts, each over the one connection
(`_conn`): `_inbox`, `_cursors`, `_ledger`, `_links`, and `_lease` (leases
and notices, given by `RedisStore.replication`).
"""

from __future__ import annotations

from chatbridge.core.ports.store import Store, StoreSettings
from chatbridge.stores.redis.store import RedisStore

__all__ = ["RedisStore", "open_store"]


async def open_store(settings: StoreSettings) -> Store:
    """The store at `settings.url`, connected (PING answered)."""
    store = RedisStore(settings.url, max_entries=settings.max_entries)
    await store.open()
    return store
