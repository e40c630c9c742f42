"""Engine per-message overhead with the debug provider (run: python3 -m tests.bench.bench_engine).

Each message goes through the real engine: access, command parse, lock,
session load/create, bridging, the debug provider's stream, delivery into a
null outbox, and the SQLite writes (inbox add, two progress records, the
commit). Prints p50/p99 latency and throughput at 1, 100 and 10k concurrent
conversations.
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.platforms.base import PlatformLimits
from chatbridge.providers.debug import DebugProvider
from chatbridge.stores.sqlite import SqliteStore


class NullOutbox:
    limits = PlatformLimits(max_chars=4096, edit_interval=None)

    async def send(self, text: str) -> str:
        return "0"  # a message reference, as every outbox returns

    async def edit(self, message: str, text: str) -> None:
        return None

    async def typing(self) -> None:
        return None


async def run(conversations: int, messages_per_conversation: int, db: Path) -> dict[str, float]:
    store = SqliteStore(db, max_entries=20)
    await store.open()
    engine = Engine(
        EngineSettings(), store=store, provider=DebugProvider(), access=AccessPolicy(allow=[])
    )
    outbox = NullOutbox()
    latencies: list[float] = []

    async def talk(index: int) -> None:
        conversation = Conversation(
            platform="console", chat=f"c{index}", user=f"u{index}", kind=ChatKind.PRIVATE
        )
        for turn in range(messages_per_conversation):
            message = IncomingMessage(conversation=conversation, text=f"Nachricht {turn}")
            started = time.perf_counter()
            await engine.handle(message, outbox)
            latencies.append(time.perf_counter() - started)

    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(talk(i) for i in range(conversations)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    await store.aclose()
    latencies.sort()
    return {
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "msgs_per_s": len(latencies) / wall,
        "cpu_us": cpu / len(latencies) * 1e6,
        "messages": len(latencies),
    }


def main() -> None:
    print(
        f"# engine overhead — {platform.processor() or platform.machine()}, "
        f"Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}"
    )
    print("| concurrent conversations | messages | p50 ms | p99 ms | messages/s | CPU µs/message |")
    print("|---:|---:|---:|---:|---:|---:|")
    for conversations, per in ((1, 2000), (100, 20), (10_000, 2)):
        with tempfile.TemporaryDirectory() as tmp:
            r = asyncio.run(run(conversations, per, Path(tmp) / "bench.db"))
        print(
            f"| {conversations} | {r['messages']:.0f} | {r['p50_ms']:.3f} | "
            f"{r['p99_ms']:.3f} | {r['msgs_per_s']:.0f} | {r['cpu_us']:.0f} |"
        )


if __name__ == "__main__":
    main()
