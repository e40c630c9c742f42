"""Persistence for sessions, memory rings, usage and the inbox; see `base.Store`.

The backends are imported on first use (`open_store`, or the names
`SqliteStore`, `JsonStore`, `RedisStore` from this package), so a bot on
SQLite never loads the redis client library.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chatbridge.core.ports.store import (
    DEDUPE_WINDOW,
    Inbox,
    LeaseLost,
    Store,
    StoreCorrupt,
    StoreError,
)

if TYPE_CHECKING:
    from chatbridge.stores.json import JsonStore
    from chatbridge.stores.redis import RedisStore
    from chatbridge.stores.sqlite import SqliteStore

__all__ = [
    "DEDUPE_WINDOW",
    "Inbox",
    "JsonStore",
    "LeaseLost",
    "RedisStore",
    "SqliteStore",
    "Store",
    "StoreCorrupt",
    "StoreError",
    "open_store",
]

_BACKENDS = {
    "SqliteStore": "chatbridge.stores.sqlite",
    "JsonStore": "chatbridge.stores.json",
    "RedisStore": "chatbridge.stores.redis",
}


def __getattr__(name: str) -> Any:
    """`from chatbridge.stores import RedisStore` imports the backend only then."""
    module = _BACKENDS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


async def open_store(*, backend: str, path: Path, url: str, max_entries: int) -> Store:
    """Build and open the configured backend; raises `StoreError` if it cannot be used.

    `path` is used by "sqlite" and "json", `url` only by "redis".
    """
    store: SqliteStore | JsonStore | RedisStore
    if backend == "sqlite":
        from chatbridge.stores.sqlite import SqliteStore

        store = SqliteStore(path, max_entries=max_entries)
    elif backend == "json":
        from chatbridge.stores.json import JsonStore

        store = JsonStore(path, max_entries=max_entries)
    elif backend == "redis":
        from chatbridge.stores.redis import RedisStore

        store = RedisStore(url, max_entries=max_entries)
    else:
        raise StoreError(f"unknown store backend {backend!r}; use sqlite, json or redis")
    await store.open()
    return store
