"""Taking a conversation's turn with a backlog elsewhere (issue 15).

Run: python3 -m tests.bench.bench_lease

What a replica does to take one conversation's turn, measured with 10 and
with 10,000 messages of other conversations pending in the inbox: the Redis
lease (SET NX, the fence INCR, the release) and the read of that
conversation's pending entries (`inbox_pending_of`), the conversation holding
one pending message. The same read on SQLite and the JSON store (the local
scheduler does not read the inbox at all; the read is there for the
protocol). The last column is a whole-inbox read (`inbox_pending`, what the
sweep does every few seconds) on the same data, to show what grows with the
backlog. Redis is the bench run's own server (`tests.support.redis_server`),
under a key prefix of its own that is deleted afterwards.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from chatbridge.core.models import Conversation, InboxEntry, IncomingMessage
from chatbridge.stores.json import JsonStore
from chatbridge.stores.redis import RedisStore
from chatbridge.stores.sqlite import SqliteStore
from tests.stores.helpers import purge_redis
from tests.support.redis_server import redis_url

BACKLOGS = (10, 10_000)
ROUNDS = 300
FULL_ROUNDS = 5


def _entry(n: int, conversation: Conversation, now: float) -> InboxEntry:
    message = IncomingMessage(conversation, f"Nachricht {n} " + "x" * 80, event_id=str(n))
    return InboxEntry(f"{conversation.platform}:{n}", message, received_at=now + n * 1e-6)


async def _fill(store: RedisStore | SqliteStore | JsonStore, backlog: int) -> Conversation:
    """`backlog` pending messages in other conversations, one in ours. The
    JSON store rewrites its file on every add, so its backlog goes straight
    into its state in memory (what its reads look at)."""
    now = time.time()
    for n in range(backlog):
        other = Conversation("telegram", str(1_000_000 + n % 500), str(n % 500))
        entry = _entry(n, other, now)
        if isinstance(store, JsonStore):
            store._live().inbox[entry.key] = entry
        else:
            await store.inbox_add(entry)
    ours = Conversation("telegram", "42", "42")
    assert await store.inbox_add(_entry(backlog, ours, now))
    return ours


async def _times(work: Callable[[], Awaitable[object]], rounds: int) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        await work()
        samples.append(time.perf_counter() - started)
    samples.sort()
    return statistics.median(samples) * 1e3, samples[int(len(samples) * 0.99) - 1] * 1e3


async def _redis(backlog: int) -> str:
    prefix = f"cbbench:lease:{uuid.uuid4().hex[:8]}:"
    store = RedisStore(redis_url(), max_entries=20, prefix=prefix)
    await store.open()
    try:
        ours = await _fill(store, backlog)
        leases = store.replication(lease_ttl=30.0).leases

        async def take_turn() -> None:
            async with leases.hold(ours.key):
                assert len(await store.inbox_pending_of(ours)) == 1

        p50, p99 = await _times(take_turn, ROUNDS)
        full, _ = await _times(store.inbox_pending, FULL_ROUNDS)
        return f"| redis | {backlog} | lease + read | {p50:.3f} | {p99:.3f} | {full:.1f} |"
    finally:
        await store.aclose()
        purge_redis(prefix)


async def _file_store(kind: str, backlog: int, root: Path) -> str:
    store: SqliteStore | JsonStore
    if kind == "sqlite":
        store = SqliteStore(root / f"bench-{backlog}.db", max_entries=20)
    else:
        store = JsonStore(root / f"bench-{backlog}", max_entries=20)
    await store.open()
    try:
        ours = await _fill(store, backlog)

        async def read() -> None:
            assert len(await store.inbox_pending_of(ours)) == 1

        p50, p99 = await _times(read, ROUNDS)
        full, _ = await _times(store.inbox_pending, FULL_ROUNDS)
        return f"| {kind} | {backlog} | read | {p50:.3f} | {p99:.3f} | {full:.1f} |"
    finally:
        await store.aclose()


async def main() -> None:
    print(
        f"# taking a conversation's turn — Python {sys.version.split()[0]}, "
        f"load average {os.getloadavg()[0]:.2f}, {ROUNDS} rounds each"
    )
    print(
        "| store | pending elsewhere | per turn | p50 ms | p99 ms | whole inbox read ms (sweep) |"
    )
    print("|---|---:|---|---:|---:|---:|")
    for backlog in BACKLOGS:
        print(await _redis(backlog))
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("sqlite", "json"):
            for backlog in BACKLOGS:
                print(await _file_store(kind, backlog, Path(tmp)))


if __name__ == "__main__":
    asyncio.run(main())
