"""Builders shared by the store tests and the crash child process."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import redis

from chatbridge.core.models import (
    ChatKind,
    Conversation,
    Exchange,
    InboxEntry,
    IncomingMessage,
    MemoryEntry,
    Session,
    Turn,
    Usage,
)
from chatbridge.stores.json import JsonStore
from chatbridge.stores.redis import RedisStore
from chatbridge.stores.sqlite import SqliteStore
from tests.support.redis_server import redis_url

BACKENDS = ("sqlite", "json", "redis")
AnyStore = SqliteStore | JsonStore | RedisStore

# The redis tests use the run's own server (tests.support.redis_server); each
# test still gets its own key prefix, so a server named by the environment is safe.
_RUN = uuid.uuid4().hex[:8]  # parallel or earlier runs never share a prefix


def store_path(backend: str, root: Path) -> Path:
    """A path one directory down, so `open()` must create the parent."""
    return root / "data" / ("chatbridge.db" if backend == "sqlite" else "memory.json")


def new_store(backend: str, path: Path, *, max_entries: int = 5) -> AnyStore:
    """For redis, `path` only names the test's key prefix (same path, same data)."""
    if backend == "redis":
        return RedisStore(redis_url(), max_entries=max_entries, prefix=redis_prefix(path))
    cls = SqliteStore if backend == "sqlite" else JsonStore
    return cls(path, max_entries=max_entries)


def redis_prefix(path: Path) -> str:
    return f"cbtest:{_RUN}:{hashlib.sha256(str(path).encode()).hexdigest()[:16]}:"


def redis_keys(prefix: str) -> dict[str, object]:
    """Every key under `prefix` with its type-appropriate value (SCAN, not KEYS)."""
    client = redis.Redis.from_url(redis_url(), decode_responses=True)
    readers = {
        "string": client.get,
        "list": lambda k: client.lrange(k, 0, -1),
        "hash": client.hgetall,
        "set": client.smembers,
        "zset": lambda k: client.zrange(k, 0, -1),
    }
    try:
        return {k: readers[str(client.type(k))](k) for k in client.scan_iter(match=f"{prefix}*")}
    finally:
        client.close()


def purge_redis(prefix: str) -> None:
    client = redis.Redis.from_url(redis_url())
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


async def opened(backend: str, path: Path, *, max_entries: int = 5) -> AnyStore:
    store = new_store(backend, path, max_entries=max_entries)
    await store.open()
    return store


class Stores:
    """The `stores` fixture: `await stores(backend, path)` is `opened`, and every
    store opened is closed when the test ends, also after a failed assert
    (closing one early, to reopen it as after a restart, is fine: `aclose`
    is idempotent)."""

    def __init__(self) -> None:
        self._opened: list[AnyStore] = []

    async def __call__(self, backend: str, path: Path, *, max_entries: int = 5) -> AnyStore:
        store = await opened(backend, path, max_entries=max_entries)
        self._opened.append(store)
        return store

    async def aclose(self) -> None:
        """Close every store opened, newest first; the first failure is raised after all."""
        failures: list[BaseException] = []
        for store in reversed(self._opened):
            try:
                await store.aclose()
            except Exception as exc:
                failures.append(exc)
        if failures:
            raise failures[0]


def exchange(
    text: str,
    *,
    user: str = "telegram:1",
    ts: float = 1000.0,
    key: str = "",
    day: str = "2025-04-05",
    tokens: tuple[int, int] = (3, 5),
    started: float | None = None,
) -> Exchange:
    """One answered message whose text appears in the session, ring entry and summary.

    The session started at `started`, by default a minute before `ts`.
    """
    key = key or f"{user}:chat"
    turns = [Turn("user", text), Turn("assistant", f"answer to {text}")]
    session = Session(key, user, ts - 60.0 if started is None else started, ts, turns)
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


def inbox_entry(
    key: str,
    text: str = "hello",
    *,
    at: float = 1000.0,
    user: str = "1",
    kind: ChatKind = ChatKind.PRIVATE,
    answer: str | None = None,
    sent: tuple[str, ...] = (),
) -> InboxEntry:
    """A received message whose every field differs from its default."""
    chat = "-100" if kind is ChatKind.GROUP else user
    conversation = Conversation("telegram", chat, user, "7" if kind is ChatKind.GROUP else "", kind)
    event = key.partition(":")[2]
    message = IncomingMessage(conversation, text, event_id=event, reply_address=f"{chat}/{event}")
    return InboxEntry(key, message, at, answer, sent)
