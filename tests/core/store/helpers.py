"""Builders shared by the store tests and the crash child process."""

from __future__ import annotations

import hashlib
from pathlib import Path

from core.models import Exchange, MemoryEntry, Session, Turn, Usage
from core.store import JsonStore, SqliteStore

BACKENDS = ("sqlite", "json")
AnyStore = SqliteStore | JsonStore


def store_path(backend: str, root: Path) -> Path:
    """A path one directory down, so `open()` must create the parent."""
    return root / "data" / ("chatbridge.db" if backend == "sqlite" else "memory.json")


def new_store(backend: str, path: Path, *, max_entries: int = 5) -> AnyStore:
    cls = SqliteStore if backend == "sqlite" else JsonStore
    return cls(path, max_entries=max_entries)


async def opened(backend: str, path: Path, *, max_entries: int = 5) -> AnyStore:
    store = new_store(backend, path, max_entries=max_entries)
    await store.open()
    return store


def exchange(
    text: str,
    *,
    user: str = "telegram:1",
    ts: float = 1000.0,
    key: str = "",
    day: str = "2025-04-05",
    tokens: tuple[int, int] = (3, 5),
) -> Exchange:
    """One answered message whose text appears in the session, ring entry and summary."""
    key = key or f"{user}:chat"
    turns = [Turn("user", text), Turn("assistant", f"answer to {text}")]
    session = Session(key, user, ts - 60.0, ts, turns)
    entry = MemoryEntry(ts, text, f"summary of {text}", f"sess_{key}", "/srv", user, "private")
    return Exchange(user, session, entry, Usage(*tokens), day)


def snapshot(directory: Path) -> dict[str, str]:
    """sha256 of every file under `directory`, by relative name."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def raw_bytes(directory: Path) -> bytes:
    """Every byte of every file under `directory` (db, -wal, -shm, json, state, temp)."""
    return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())
