"""Per-exchange cost of the store backends: `commit_exchange` + `ring(user, since)`,
then what the inbox adds per message: `inbox_add` + marking done in the commit.

Run: python3 -m tests.bench.bench_store [--quick] [--inbox-only]

For each backend and user count the store is pre-populated with two ring
entries, a session and a usage row per user; then random users each get one
exchange and one context read (what the engine does per answered message).
Prints a markdown table of wall-clock microseconds per exchange, plus the
thread's CPU time (which a busy shared machine inflates less than wall time).

Pre-population bypasses `commit_exchange` (SQLite: one bulk transaction with
the same rows; JSON: the files written directly in their documented format),
because 200k single commits would dominate the run without telling us
anything about the steady state. JSON rewrites whole files on every commit,
so it is O(total size) per write and gets few samples at large sizes.

The inbox table alternates plain exchanges (`commit_exchange`, no inbox
entry) with inboxed ones (`inbox_add`, then `commit_exchange` with that
`inbox_key`) over 1,000 users, the SQLite inbox holding an hour of done
markers; "writes" are write transactions (SQLite) or round trips (Redis:
calls of redis-py's `send_packed_command`), both counted while the timed
loop runs; "WAL pages" the frames SQLite appended per message (counted with
`PRAGMA wal_checkpoint` over a separate run of each kind). Redis rows need the
server the bench starts itself (tests.support.redis_server) and are skipped without redis-server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from chatbridge.core.models import (
    Conversation,
    Exchange,
    InboxEntry,
    IncomingMessage,
    MemoryEntry,
    Session,
    Turn,
    Usage,
)
from chatbridge.core.ports.store import DEDUPE_WINDOW
from chatbridge.stores.json import JsonStore
from chatbridge.stores.redis import RedisStore
from chatbridge.stores.sqlite import SqliteStore
from tests.support.redis_server import redis_url

REDIS_URL = redis_url()  # the bench run's own server, never a developer's

DAY = "2025-04-05"
NOW = 1_743_854_580.0
MAX_ENTRIES = 10
TEXT = "Wo bleibt das Paket? Bitte den Status der Sendung prüfen und Bescheid geben."
SUMMARY = "UPS Tracking 1Z999AA10123456784 — Status: In Transit. Zustellung Mittwoch. " * 2
USER_COUNTS = (10, 1_000, 100_000)
SAMPLES = {
    "sqlite": {10: 5000, 1_000: 5000, 100_000: 5000},
    "json": {10: 200, 1_000: 50, 100_000: 5},
}
WARMUP = {"sqlite": 500, "json": 2}


def user_id(i: int) -> str:
    return f"telegram:{100_000_000 + i}"


def exchange(user: str, ts: float) -> Exchange:
    turns = [Turn("user", TEXT), Turn("assistant", SUMMARY)] * 2
    session = Session(f"{user}:chat", user, ts - 300.0, ts, turns)
    entry = MemoryEntry(ts, TEXT, SUMMARY, f"sess_{user}", "/srv/bot", user, "private")
    return Exchange(user, session, entry, Usage(120, 80), DAY)


def seed_rows(users: int) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Two entries, one session and one usage row per user, as JSON-shaped dicts."""
    turns = [{"role": t.role, "content": t.content} for t in exchange("x", 0).session.turns]
    ring, sessions, usage = [], {}, {}
    for i in range(users):
        u = user_id(i)
        for k in range(2):
            ring.append(
                {
                    "timestamp": NOW - 600 + k,
                    "user_message": TEXT,
                    "assistant_summary": SUMMARY,
                    "session_name": f"sess_{u}",
                    "workdir": "/srv/bot",
                    "user": u,
                    "scope": "private",
                }
            )
        sessions[f"{u}:chat"] = {
            "user": u,
            "started_at": NOW - 900,
            "last_active": NOW - 600,
            "turns": turns,
        }
        usage[u] = {DAY: {"input_tokens": 240, "output_tokens": 160}}
    return ring, sessions, usage


def populate_sqlite(path: Path, users: int) -> None:
    ring, sessions, usage = seed_rows(users)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO ring(id, timestamp, user_message, assistant_summary, session_name,"
        " workdir, user, scope) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(n, *e.values()) for n, e in enumerate(ring, start=1)],
    )
    db.executemany(
        "INSERT INTO sessions VALUES (?, ?, ?, ?)",
        [(k, s["user"], s["started_at"], s["last_active"]) for k, s in sessions.items()],
    )
    db.executemany(
        "INSERT INTO turns(key, id, role, content) VALUES (?, ?, ?, ?)",
        [
            (k, n, t["role"], t["content"])
            for k, s in sessions.items()
            for n, t in enumerate(s["turns"], start=1)
        ],
    )
    db.executemany(
        "INSERT INTO usage(user, day, input_tokens, output_tokens) VALUES (?, ?, 240, 160)",
        [(u, DAY) for u in usage],
    )
    db.execute("COMMIT")
    db.close()


def populate_json(path: Path, users: int) -> None:
    ring, sessions, usage = seed_rows(users)
    state = {"sessions": sessions, "usage": usage, "last_entry": None}
    for target, value in ((path, ring), (Path(f"{path}.state.json"), state)):
        target.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")


async def make_store(backend: str, directory: Path, users: int) -> SqliteStore | JsonStore:
    if backend == "sqlite":
        path = directory / "chatbridge.db"
        empty = SqliteStore(path, max_entries=MAX_ENTRIES)
        await empty.open()  # creates the schema
        await empty.aclose()
        populate_sqlite(path, users)
        store: SqliteStore | JsonStore = SqliteStore(path, max_entries=MAX_ENTRIES)
    else:
        path = directory / "memory.json"
        populate_json(path, users)
        store = JsonStore(path, max_entries=MAX_ENTRIES)
    await store.open()
    return store


async def measure(backend: str, users: int, samples: int) -> dict[str, float]:
    rng = random.Random(users)
    with tempfile.TemporaryDirectory(prefix="bench_store_") as tmp:
        t0 = time.perf_counter()
        store = await make_store(backend, Path(tmp), users)
        setup = time.perf_counter() - t0
        totals, commits, reads, cpu = [], [], [], []
        for n in range(WARMUP[backend] + samples):
            user = user_id(rng.randrange(users))
            ex = exchange(user, NOW + n)
            c1, t1 = time.thread_time_ns(), time.perf_counter_ns()
            await store.commit_exchange(ex)
            t2 = time.perf_counter_ns()
            context = await store.ring(user, since=NOW - 3600)
            t3, c3 = time.perf_counter_ns(), time.thread_time_ns()
            assert context[-1].timestamp == NOW + n
            if n >= WARMUP[backend]:
                totals.append((t3 - t1) / 1000)
                commits.append((t2 - t1) / 1000)
                reads.append((t3 - t2) / 1000)
                cpu.append((c3 - c1) / 1000)
        await store.aclose()
    return summary(setup, totals, commits, reads, cpu)


def summary(
    setup: float, totals: list[float], commits: list[float], reads: list[float], cpu: list[float]
) -> dict[str, float]:
    """One backend's row: set-up seconds, then microseconds per commit-and-read
    (mean, p50, p99 of the whole; the mean of each part and of CPU time)."""
    samples = len(totals)
    totals = sorted(totals)
    return {
        "samples": samples,
        "setup_s": setup,
        "mean": sum(totals) / samples,
        "p50": totals[samples // 2],
        "p99": totals[min(samples - 1, int(samples * 0.99))],
        "commit": sum(commits) / samples,
        "ring": sum(reads) / samples,
        "cpu": sum(cpu) / samples,
    }


def bare_transaction_us(runs: int = 2000) -> float:
    """Median of one-row INSERT transactions on a fresh WAL file with
    `synchronous=NORMAL`: the floor under every SQLite commit."""
    with tempfile.TemporaryDirectory(prefix="bench_store_") as tmp:
        db = sqlite3.connect(Path(tmp) / "floor.db", isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("CREATE TABLE t(v TEXT)")
        times = []
        for i in range(runs):
            t = time.perf_counter_ns()
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t VALUES (?)", (f"row {i}",))
            db.execute("COMMIT")
            times.append((time.perf_counter_ns() - t) / 1000)
        db.close()
    times.sort()
    return times[len(times) // 2]


def calibration_us() -> float:
    """sum(range(1000)), best of 5 x 2000: ~8-10 µs on a current laptop core."""
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(2000):
            sum(range(1000))
        best = min(best, (time.perf_counter() - t) / 2000 * 1e6)
    return best


def inbox_entry(user: str, n: int) -> InboxEntry:
    platform, _, ident = user.partition(":")
    conversation = Conversation(platform, ident, ident)
    message = IncomingMessage(conversation, TEXT, event_id=str(n), reply_address=f"{ident}/{n}")
    return InboxEntry(f"{platform}:{n}", message, time.time())


def add_done_markers(path: Path, count: int) -> None:
    """An hour of traffic's done markers, as the steady state holds them."""
    now = time.time()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO inbox(key, received_at, done_at) VALUES (?, ?, ?)",
        [
            (f"telegram:old-{i}", now - DEDUPE_WINDOW, now - DEDUPE_WINDOW * (1 - i / count))
            for i in range(count)
        ],
    )
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def count_writes(store: SqliteStore) -> list[int]:
    """Wrap the store's two write helpers so each write transaction is counted
    (a BEGIN IMMEDIATE block, or one autocommit statement of the inbox)."""
    counter = [0]
    txn, autocommit = store._txn, store._autocommit

    def counting_txn() -> Any:
        counter[0] += 1
        return txn()

    def counting_autocommit() -> Any:
        counter[0] += 1
        return autocommit()

    store._txn = counting_txn  # type: ignore[method-assign]
    store._autocommit = counting_autocommit  # type: ignore[method-assign]
    return counter


_ROUND_TRIPS: list[int] = []


def count_round_trips() -> list[int]:
    """A counter of Redis round trips (one list, the same on every call):
    redis-py writes each command, and each whole pipeline (MULTI ... EXEC),
    with one `send_packed_command` and then waits for the replies; so a call
    of it is one round trip."""
    if _ROUND_TRIPS:
        return _ROUND_TRIPS
    from redis.asyncio.connection import AbstractConnection

    _ROUND_TRIPS.append(0)
    send = AbstractConnection.send_packed_command

    async def counting(self: Any, command: Any, check_health: bool = True) -> None:
        _ROUND_TRIPS[0] += 1
        await send(self, command, check_health)

    AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
    return _ROUND_TRIPS


async def wal_pages(store: SqliteStore, users: int, inboxed: bool, n: int) -> float:
    """WAL frames appended per message over `n` messages of one kind."""
    db = store._conn()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rng = random.Random(7)
    for i in range(n):
        user = user_id(rng.randrange(users))
        ex = exchange(user, NOW + i)
        if inboxed:
            entry = inbox_entry(user, 10_000_000 + i)  # keys the timed run never used
            await store.inbox_add(entry)
            ex = replace(ex, inbox_key=entry.key)
        await store.commit_exchange(ex)
    _, frames, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return int(frames) / n


async def open_inbox_store(backend: str, tmp: Path, users: int) -> SqliteStore | RedisStore:
    if backend == "redis":
        redis = RedisStore(REDIS_URL, max_entries=MAX_ENTRIES, prefix=f"bench:{os.getpid()}:")
        await redis.open()
        return redis
    store = await make_store("sqlite", tmp, users)
    assert isinstance(store, SqliteStore)
    await store.aclose()
    add_done_markers(tmp / "chatbridge.db", 3600 * 5)  # an hour at 5 messages a second
    await store.open()
    return store


async def measure_inbox(backend: str, samples: int) -> dict[str, float]:
    users = 1_000
    rng = random.Random(users)
    adds, commits_done, commits_plain = [], [], []
    with tempfile.TemporaryDirectory(prefix="bench_store_") as tmp:
        store = await open_inbox_store(backend, Path(tmp), users)
        try:
            counter = count_writes(store) if isinstance(store, SqliteStore) else count_round_trips()
            writes = {True: 0, False: 0}
            warmup = 200
            for n in range(2 * (warmup + samples)):
                user = user_id(rng.randrange(users))
                ex = exchange(user, NOW + n)
                inboxed = n % 2 == 0
                before = counter[0]
                t0 = time.perf_counter_ns()
                if inboxed:
                    entry = inbox_entry(user, n)
                    assert await store.inbox_add(entry)
                    ex = replace(ex, inbox_key=entry.key)
                t1 = time.perf_counter_ns()
                await store.commit_exchange(ex)
                t2 = time.perf_counter_ns()
                if n >= 2 * warmup:
                    writes[inboxed] += counter[0] - before
                    if inboxed:
                        adds.append((t1 - t0) / 1000)
                        commits_done.append((t2 - t1) / 1000)
                    else:
                        commits_plain.append((t2 - t1) / 1000)
            assert await store.inbox_pending() == []
            pages = (0.0, 0.0)
            if isinstance(store, SqliteStore):
                pages = (
                    await wal_pages(store, users, False, 200),
                    await wal_pages(store, users, True, 200),
                )
        finally:
            if isinstance(store, RedisStore):
                client = store._db.client()
                keys = [k async for k in client.scan_iter(match=f"{store._db.prefix}*")]
                for i in range(0, len(keys), 1000):
                    await client.delete(*keys[i : i + 1000])
            await store.aclose()
    return {
        "samples": samples,
        "add": mean(adds),
        "commit_done": mean(commits_done),
        "commit_plain": mean(commits_plain),
        "writes_plain": writes[False] / samples,
        "writes_inbox": writes[True] / samples,
        "pages_plain": pages[0],
        "pages_inbox": pages[1],
    }


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def redis_available() -> bool:
    import redis as redis_client  # the bench may import redis; the bot on SQLite does not

    try:
        with redis_client.Redis.from_url(REDIS_URL, socket_connect_timeout=1.0) as client:
            client.ping()
    except (OSError, redis_client.RedisError):
        return False
    return True


async def inbox_table(quick: bool) -> None:
    print(
        "\n| backend | messages | inbox_add µs | commit + done µs | commit alone µs "
        "| inbox per message µs | writes per message | WAL pages per message |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for backend in ("sqlite", "redis"):
        if backend == "redis" and not redis_available():
            print(f"| redis | skipped: no server at {REDIS_URL} | | | | | | |")
            continue
        r = await measure_inbox(backend, 2000 // (10 if quick else 1))
        extra = r["add"] + r["commit_done"] - r["commit_plain"]
        pages = f"{r['pages_plain']:.1f} → {r['pages_inbox']:.1f}" if backend == "sqlite" else "–"
        print(
            f"| {backend} | {r['samples']} | {r['add']:,.0f} | {r['commit_done']:,.0f} "
            f"| {r['commit_plain']:,.0f} | {extra:,.0f} "
            f"| {r['writes_plain']:g} → {r['writes_inbox']:g} | {pages} |",
            flush=True,
        )


async def main(quick: bool, inbox_only: bool = False) -> None:
    print(
        f"calibration: sum(range(1000)) = {calibration_us():.1f} µs; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; sqlite "
        f"{sqlite3.sqlite_version}; a bare one-row transaction (WAL, synchronous=NORMAL) "
        f"{bare_transaction_us():.0f} µs p50\n"
    )
    if not inbox_only:
        await exchange_table(quick)
    await inbox_table(quick)


async def exchange_table(quick: bool) -> None:
    print(
        "| backend | users | exchanges | mean µs | p50 µs | p99 µs "
        "| commit mean µs | ring mean µs | CPU mean µs | setup s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for backend in ("sqlite", "json"):
        for users in USER_COUNTS:
            samples = SAMPLES[backend][users] // (10 if quick else 1) or 1
            r = await measure(backend, users, samples)
            print(
                f"| {backend} | {users:,} | {r['samples']} | {r['mean']:,.0f} | {r['p50']:,.0f} "
                f"| {r['p99']:,.0f} | {r['commit']:,.0f} | {r['ring']:,.0f} "
                f"| {r['cpu']:,.0f} | {r['setup_s']:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the samples")
    parser.add_argument("--inbox-only", action="store_true", help="only the inbox table")
    args = parser.parse_args()
    asyncio.run(main(args.quick, args.inbox_only))
