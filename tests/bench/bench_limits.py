"""What limits cost per message (run: python3 -m tests.bench.bench_limits).

Two measurements, each printed as it ran:

1. The engine on SQLite with the debug provider and a null outbox (as
   `bench_engine`), without a limit gate and with one (a daily token limit and
   a messages-per-minute limit far above what the run uses, so every message
   is reserved, admitted and settled): two engines on two stores, the same
   message on each in turn (20 conversations), CPU time taken around each
   `handle`; the difference is the limit check's cost inside the engine.
2. The calls one limited message makes besides its commit (the sender's link
   lookup and the reserve; the settlement rides in the exchange's commit), by
   themselves, on SQLite and on Redis (the run's own redis-server,
   `tests.support.redis_server`): wall µs per message.

The brief's bound: the check must cost under 10 % of the engine's per-message
cost on SQLite (the "engine alone" CPU µs of the same run).
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
from collections.abc import AsyncIterator
from pathlib import Path

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
from tests.support.redis_server import redis_unavailable, redis_url

LIMITS = Limits(tokens_per_day=10**12, messages_per_minute=10**6)
MESSAGES = 400  # per round: 20 conversations x 20 messages
ROUNDS = 11


class ShortProvider:
    """A chat-sized answer (300 characters) and its usage, like a real model's."""

    name = label = "short"
    model = "short"

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        yield TextDelta("Das Paket kommt am Mittwoch. " * 10)
        yield UsageReport(Usage(input_tokens=400, output_tokens=80))

    async def aclose(self) -> None:
        return None


async def _engine(db: Path, *, limited: bool, short: bool) -> tuple[Engine, SqliteStore]:
    store = SqliteStore(db, max_entries=20)
    await store.open()
    gate = None
    if limited:
        gate = LimitGate(LimitPolicy(default=LIMITS), store=store, clock=_Wall(), timezone=None)
    engine = Engine(
        EngineSettings(), store=store, provider=ShortProvider() if short else DebugProvider(),
        access=AccessPolicy(),
        limits=gate,
    )  # fmt: skip
    return engine, store


async def engine_round(root: Path, *, short: bool) -> tuple[float, float]:
    """CPU µs per message without and with limits: two engines on two stores,
    one message on each in turn, so both see the same machine at the same time."""
    (plain, plain_store), (gated, gated_store) = (
        await _engine(root / "plain.db", limited=False, short=short),
        await _engine(root / "gated.db", limited=True, short=short),
    )
    outbox = NullOutbox()
    spent = [0.0, 0.0]
    for turn in range(MESSAGES // 20):
        for index in range(20):
            conversation = Conversation(
                platform="console", chat=f"c{index}", user=f"u{index}", kind=ChatKind.PRIVATE
            )
            message = IncomingMessage(conversation=conversation, text=f"Nachricht {turn}")
            for side, engine in enumerate((plain, gated)):
                cpu = time.process_time()
                await engine.handle(message, outbox)
                spent[side] += time.process_time() - cpu
    await plain_store.aclose()
    await gated_store.aclose()
    return spent[0] / MESSAGES * 1e6, spent[1] / MESSAGES * 1e6


class _Wall:
    def now(self) -> float:
        return time.time()


async def ledger_round(store: SqliteStore | RedisStore, count: int) -> tuple[float, float]:
    """Wall and CPU µs per message of the calls an answer makes outside its commit:
    the sender's link lookup and the reserve (each hold is settled untimed after)."""
    account = Account(f"person:bench-{uuid.uuid4().hex[:6]}", LIMITS)
    wall = cpu = 0.0
    for _ in range(count):
        now = time.time()
        hold = Hold(uuid.uuid4().hex, (account,), 1200, 0, "2026-12-02", "2026-12", now, now + 300)
        started, used = time.perf_counter(), time.process_time()
        await store.link_group("console:bench")
        verdict = await store.ledger_reserve(hold)
        wall += time.perf_counter() - started
        cpu += time.process_time() - used
        assert verdict.ok
        settled = Settlement(hold.id, (account.key,), hold.day, hold.month, 900, 100, 0)
        await store.ledger_settle(settled)
    return wall / count * 1e6, cpu / count * 1e6


def _median(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


async def ledger_rows() -> list[tuple[str, tuple[float, float]]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = SqliteStore(Path(tmp) / "ledger.db", max_entries=20)
        await sqlite.open()
        rows.append(("sqlite", _median([await ledger_round(sqlite, 500) for _ in range(3)])))
        await sqlite.aclose()
    if reason := redis_unavailable():
        print(f"(redis skipped: {reason})")
        return rows
    redis = RedisStore(redis_url(11), max_entries=20, prefix=f"bench-limits:{uuid.uuid4().hex}:")
    await redis.open()
    rows.append(("redis", _median([await ledger_round(redis, 500) for _ in range(3)])))
    await redis.aclose()
    return rows


def main() -> None:
    print(
        f"# limits cost — {platform.processor() or platform.machine()}, "
        f"Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}"
    )
    print("| engine on SQLite, provider | messages | CPU µs/message | with limits | check |")
    print("|---|---:|---:|---:|---:|")
    base = 0.0
    for short in (True, False):
        alone: list[float] = []
        limited: list[float] = []
        for _ in range(ROUNDS):
            with tempfile.TemporaryDirectory() as tmp:
                plain, gated = asyncio.run(engine_round(Path(tmp), short=short))
            alone.append(plain)
            limited.append(gated)
        plain_us, gated_us = statistics.median(alone), statistics.median(limited)
        paired = statistics.median(b - a for a, b in zip(alone, limited, strict=True))
        name = "300-char answers" if short else "debug (echoes the whole prompt)"
        print(
            f"| {name} | {MESSAGES * ROUNDS} | {plain_us:.0f} | {gated_us:.0f} "
            f"| {paired:.0f} µs = {paired / plain_us:.1%} |"
        )
        base = base or plain_us
    print(
        "\n| link lookup + reserve | wall µs/message | CPU µs/message "
        "| CPU share of the engine's CPU µs/message (300-char answers) |"
    )
    print("|---|---:|---:|---:|")
    for name, (wall, cpu) in asyncio.run(ledger_rows()):
        print(f"| {name} | {wall:.0f} | {cpu:.0f} | {cpu / base:.1%} |")


if __name__ == "__main__":
    main()
