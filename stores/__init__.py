"""The store backends, one package each, of one shape (the contract is
`chatbridge.core.ports.store.Store`); only the composition root imports them.

Each backend package (`sqlite`, `redis`, `json`) exposes
`open_store(settings) -> Store`, and is imported here only when named, so a
bot on SQLite never loads the redis client library. What backends share is
the codec of stored values (`_codec`) and `_base.StoreBase` (`async with`).
"""

from __future__ import annotations

import importlib

from chatbridge.core.ports.store import Store, StoreError, StoreSettings

__all__ = ["BACKENDS", "open_store"]

BACKENDS: dict[str, str] = {
    "sqlite": "chatbridge.stores.sqlite",
    "json": "chatbridge.stores.json",
    "redis": "chatbridge.stores.redis",
}


async def open_store(settings: StoreSettings) -> Store:
    """The configured backend, opened; raises `StoreError` if it cannot be used."""
    name = BACKENDS.get(settings.backend)
    if name is None:
        raise StoreError(f"unknown store backend {settings.backend!r}; use sqlite, json or redis")
    store: Store = await importlib.import_module(name).open_store(settings)
    return store
