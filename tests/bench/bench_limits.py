"""What limits cost per message (run: python3 -m tests.bench.bench_limits).

Three measurements, each printed as it ran:

1. The engine on SQLite with a null outbox (as `bench_engine`), without a
   limit gate and with one (a daily token limit and a messages-per-minute
   limit far above what the run uses, so every message is reserved, admitted
   and settled): two engines on two stores, the same message on each in turn
   (20 private Telegram chats, so each sender is an ID a link could name),
   CPU time taken around each `handle`; the median paired difference is the
   limit check's cost inside the engine.
2. The same on Redis (the run's own redis-server,
   `tests.support.redis_server`), two key prefixes, 300-char answers.
3. The reserve by itself (the settlement rides in the exchange's commit),
   which on every store also reads the sender's link (`Hold.sender`); on
   Redis also, where hiredis is installed, the same call with redis-py's
   pure-Python reply parser. Round trips are calls of redis-py's
   `send_packed_command`.

`BENCH_ROUNDS=1` makes a quick run (11 rounds by default).

The issue's bound: the check must cost under 10 % of the engine's
per-message cost on SQLite (the "engine alone" CPU µs of table 1); table 3
also divides by the Redis engine's own (table 2).
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeAlias

from redis._parsers import _AsyncRESP3Parser
from redis.utils import HIREDIS_AVAILABLE

from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.core.ledger import Account, Hold, Limits, Settlement
from chatbridge.core.limits import LimitGate, LimitPolicy
from chatbridge.core.models import ChatKind, Conversation, IncomingMessage, Usage
from chatbridge.core.ports import Prompt, StreamEvent, TextDelta, UsageReport
from chatbridge.providers.debug import DebugProvider
from chatbridge.stores.redis import RedisStore
from chatbridge.stores.sqlite import SqliteStore
from tests.bench.bench_engine import NullOutbox
from tests.bench.bench_store import count_round_trips
from tests.support.redis_server import redis_unavailable, redis_url

LIMITS = Limits(tokens_per_day=10**12, messages_per_minute=10**6)
CHATS = 20
MESSAGES = 400  # per SQLite round: 20 chats x 20 messages
REDIS_MESSAGES = 200  # per Redis round: 20 chats x 10 messages
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "11"))
CALLS = 500  # per round of table 3


class ShortProvider:
    """A chat-sized answer (300 characters) and its usage, like a real model's."""

    name = label = "short"
    model = "short"

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        yield TextDelta("Das Paket kommt am Mittwoch. " * 10)
        yield UsageReport(Usage(input_tokens=400, output_tokens=80))

    async def aclose(self) -> None:
        return None


class _Wall:
    def now(self) -> float:
        return time.time()


Store: TypeAlias = SqliteStore | RedisStore


async def _engine(store: Store, *, limited: bool, short: bool) -> Engine:
    await store.open()
    gate = None
    if limited:
        gate = LimitGate(LimitPolicy(default=LIMITS), store=store, clock=_Wall(), timezone=None)
    return Engine(
        EngineSettings(), store=store, provider=ShortProvider() if short else DebugProvider(),
        access=AccessPolicy(allow=[f"telegram:{1000 + i}" for i in range(CHATS)]),
        limits=gate,
    )  # fmt: skip


async def engine_round(
    stores: tuple[Store, Store], *, short: bool, messages: int
) -> tuple[float, float]:
    """CPU µs per message without and with limits: two engines on two stores,
    one message on each in turn, so both see the same machine at the same time."""
    plain = await _engine(stores[0], limited=False, short=short)
    gated = await _engine(stores[1], limited=True, short=short)
    outbox = NullOutbox()
    spent = [0.0, 0.0]
    for turn in range(messages // CHATS):
        for index in range(CHATS):
            chat = str(1000 + index)
            conversation = Conversation(
                platform="telegram", chat=chat, user=chat, kind=ChatKind.PRIVATE
            )
            message = IncomingMessage(conversation=conversation, text=f"Nachricht {turn}")
            for side, engine in enumerate((plain, gated)):
                cpu = time.process_time()
                await engine.handle(message, outbox)
                spent[side] += time.process_time() - cpu
    for store in stores:
        await store.aclose()
    return spent[0] / messages * 1e6, spent[1] / messages * 1e6


def engine_rows(make: Callable[[Path, int], tuple[Store, Store]], *, short: bool, messages: int
                ) -> tuple[float, float, float]:  # fmt: skip
    """Median engine-alone and limited CPU µs per message, and the median paired difference."""
    alone: list[float] = []
    limited: list[float] = []
    for n in range(ROUNDS):
        with tempfile.TemporaryDirectory() as tmp:
            plain, gated = asyncio.run(
                engine_round(make(Path(tmp), n), short=short, messages=messages)
            )
        alone.append(plain)
        limited.append(gated)
    paired = statistics.median(b - a for a, b in zip(alone, limited, strict=True))
    return statistics.median(alone), statistics.median(limited), paired


def _sqlite_pair(root: Path, n: int) -> tuple[Store, Store]:
    return SqliteStore(root / "plain.db", max_entries=20), SqliteStore(
        root / "gated.db", max_entries=20
    )


def _redis_pair(root: Path, n: int) -> tuple[Store, Store]:
    run = uuid.uuid4().hex[:8]
    return tuple(  # type: ignore[return-value]
        RedisStore(redis_url(11), max_entries=20, prefix=f"bench-limits:{run}:{side}:")
        for side in ("plain", "gated")
    )


async def _now(store: Store, hold: Hold) -> None:
    assert (await store.ledger_reserve(hold)).ok


Call = Callable[[Store, Hold], Awaitable[None]]


async def calls_round(store: Store, call: Call) -> tuple[float, float, float]:
    """Wall µs, CPU µs and round trips per message of `call` (each hold is
    settled untimed after it, as the commit would)."""
    sender = f"telegram:{uuid.uuid4().int % 10**9}"
    account = Account(f"person:{sender}", LIMITS)
    trips = count_round_trips()
    wall = cpu = 0.0
    counted = 0
    for n in range(CALLS):
        now = time.time()
        hold = Hold(f"bench-{n}", (account,), 1200, 0, "2026-12-02", "2026-12", now, now + 300,
                    sender)  # fmt: skip
        before = trips[0]
        started, used = time.perf_counter(), time.process_time()
        await call(store, hold)
        wall += time.perf_counter() - started
        cpu += time.process_time() - used
        counted += trips[0] - before
        settled = Settlement(hold.id, (account.key,), hold.day, hold.month, 900, 100, 0)
        await store.ledger_settle(settled)
    return wall / CALLS * 1e6, cpu / CALLS * 1e6, counted / CALLS


def _median(rounds: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    return tuple(statistics.median(r[i] for r in rounds) for i in range(3))  # type: ignore[return-value]


async def call_rows() -> list[tuple[str, tuple[float, float, float]]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = SqliteStore(Path(tmp) / "ledger.db", max_entries=20)
        await sqlite.open()
        rows.append(
            (
                "sqlite: reserve, link read in it",
                _median([await calls_round(sqlite, _now) for _ in range(3)]),
            )
        )
        await sqlite.aclose()
    if reason := redis_unavailable():
        print(f"(redis skipped: {reason})")
        return rows
    prefix = f"bench-limits:{uuid.uuid4().hex}:"
    store = RedisStore(redis_url(11), max_entries=20, prefix=prefix + "a:")
    await store.open()
    parser = "hiredis" if HIREDIS_AVAILABLE else "redis-py's Python parser"
    cases: list[tuple[str, Store, Call]] = [
        (f"redis: reserve, link read in it ({parser})", store, _now),
    ]
    opened = [store]
    if HIREDIS_AVAILABLE:  # the same call with replies parsed in Python, for comparison
        python = RedisStore(redis_url(11), max_entries=20, prefix=prefix + "p:")
        await python.open()
        pool = python._db.client().connection_pool
        pool.connection_kwargs["parser_class"] = _AsyncRESP3Parser  # for any new connection
        conn = await pool.get_connection()  # and the one it has (the calls run one at a time)
        await conn.disconnect()
        conn.set_parser(_AsyncRESP3Parser)
        await pool.release(conn)
        cases.append(("redis: reserve (redis-py's Python parser)", python, _now))
        opened.append(python)
    found: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _, _ in cases}
    for _ in range(3):  # interleaved, so each case sees the same machine
        for name, on, call in cases:
            found[name].append(await calls_round(on, call))
    rows += [(name, _median(found[name])) for name, _, _ in cases]
    for one in opened:
        await one.aclose()
    return rows


def main() -> None:
    print(
        f"# limits cost — {platform.processor() or platform.machine()}, "
        f"Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}"
    )
    print("| engine, provider | messages | CPU µs/message | with limits | check |")
    print("|---|---:|---:|---:|---:|")
    sqlite_base = redis_base = 0.0
    runs: list[tuple[str, Callable[[Path, int], tuple[Store, Store]], bool, int]] = [
        ("SQLite, 300-char answers", _sqlite_pair, True, MESSAGES),
        ("SQLite, debug (echoes the whole prompt)", _sqlite_pair, False, MESSAGES),
    ]
    if not redis_unavailable():
        runs.append(("Redis, 300-char answers", _redis_pair, True, REDIS_MESSAGES))
    for name, make, short, messages in runs:
        plain_us, gated_us, paired = engine_rows(make, short=short, messages=messages)
        print(
            f"| {name} | {messages * ROUNDS} | {plain_us:.0f} | {gated_us:.0f} "
            f"| {paired:.0f} µs = {paired / plain_us:.1%} |"
        )
        if name.startswith("SQLite"):
            sqlite_base = sqlite_base or plain_us
        else:
            redis_base = plain_us
            print(f"| (Redis check / SQLite engine alone) | | | | {paired / sqlite_base:.1%} |")
    print(
        "\n| the limit check's calls by themselves | round trips | wall µs/message "
        "| CPU µs/message | CPU / SQLite engine | CPU / Redis engine |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, (wall, cpu, trips) in asyncio.run(call_rows()):
        of_redis = f"{cpu / redis_base:.1%}" if redis_base else "–"
        print(
            f"| {name} | {trips:.0f} | {wall:.0f} | {cpu:.0f} | {cpu / sqlite_base:.1%} "
            f"| {of_redis} |"
        )


if __name__ == "__main__":
    main()
