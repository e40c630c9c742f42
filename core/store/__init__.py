"""Persistence for sessions, memory rings and usage; see `base.Store` for the contract."""

from __future__ import annotations

from pathlib import Path

from core.store.base import Store, StoreCorrupt, StoreError
from core.store.json_file import JsonStore
from core.store.redis_store import RedisStore
from core.store.sqlite import SqliteStore

__all__ = [
    "JsonStore",
    "RedisStore",
    "SqliteStore",
    "Store",
    "StoreCorrupt",
    "StoreError",
    "open_store",
]


async def open_store(*, backend: str, path: Path, url: str, max_entries: int) -> Store:
    """Build and open the configured backend; raises `StoreError` if it cannot be used.

    `path` is used by "sqlite" and "json", `url` only by "redis".
    """
    store: SqliteStore | JsonStore | RedisStore
    if backend == "sqlite":
        store = SqliteStore(path, max_entries=max_entries)
    elif backend == "json":
        store = JsonStore(path, max_entries=max_entries)
    elif backend == "redis":
        store = RedisStore(url, max_entries=max_entries)
    else:
        raise StoreError(f"unknown store backend {backend!r}; use sqlite, json or redis")
    await store.open()
    return store
