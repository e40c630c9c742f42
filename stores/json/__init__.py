"""The JSON store: the seed's flat file and two beside it, under one lock.

For small single-process installs and for people migrating from the seed's
`conversation_memory.json` (README, "Storage"). Same shape as every backend
package: `open_store(settings)` here; the store class in `store.py`
(lifecycle, sessions and memory, the state file's one write path), which
composes the parts, each a private module over the loaded state: `_inbox`,
`_cursors`, `_ledger` (the ledger and links files); the files themselves in
`_files`.
"""

from __future__ import annotations

from chatbridge.core.ports.store import Store, StoreSettings
from chatbridge.stores.json.store import JsonStore

__all__ = ["JsonStore", "open_store"]


async def open_store(settings: StoreSettings) -> Store:
    """The store in the file `settings.path` (and its siblings), opened and locked."""
    store = JsonStore(settings.path, max_entries=settings.max_entries)
    await store.open()
    return store
