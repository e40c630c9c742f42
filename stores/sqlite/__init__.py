"""The SQLite store (the default): one file, WAL mode, every write one transaction.

Same shape as every backend package: `open_store(settings)` here; the store
class in `store.py` (lifecycle, sessions and memory, the exchange's one
transaction), which composes the parts, each a private module over the
connection: `_inbox`, `_cursors`, `_ledger`, `_links`; the file itself in
`_file`, `_check`, `_wal`, `_rows`.
"""

from __future__ import annotations

from chatbridge.core.ports.store import Store, StoreSettings
from chatbridge.stores.sqlite.store import SqliteStore

__all__ = ["SqliteStore", "open_store"]


async def open_store(settings: StoreSettings) -> Store:
    """The store in the file `settings.path`, opened (created if missing)."""
    store = SqliteStore(settings.path, max_entries=settings.max_entries)
    await store.open()
    return store
