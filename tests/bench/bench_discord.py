"""Messages/s and CPU per answered message through discord.py + engine + openai SDK.

Run: `python3 -m tests.bench.bench_discord [--users 20] [--per-user 5]` (then
a second row: one user alone, 10 DMs).

The real stack on one event loop: `FakeDiscord` (gateway + REST) -> discord.py
`Client` -> `DiscordPlatform` -> `Engine` (SQLite on a temp dir) ->
`OpenAIProvider` (openai SDK) -> `FakeOpenAI`, and the answer back through
`DiscordOutbox`. Each user DMs the bot and sends the next message only once
the previous answer is fully visible. CPU is the whole process (the fakes
included), so it is an upper bound for chatbridge's share. Nothing leaves
127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from chatbridge.config import DiscordConfig
from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.platforms.discord import DiscordPlatform
from chatbridge.providers.openai import OpenAIProvider
from chatbridge.stores.sqlite import SqliteStore
from tests.support.fake_discord import USER_ID, FakeDiscord
from tests.support.fake_openai import FakeOpenAI
from tests.support.sse import Reply

REPLY = "Das Paket kommt am Mittwoch."


async def run(users: int, per_user: int) -> dict[str, float]:
    async with FakeDiscord() as fake, FakeOpenAI(chunk_chars=10) as llm:
        llm.script(*[Reply(text=REPLY) for _ in range(users * (per_user + 1))])
        with tempfile.TemporaryDirectory() as tmp:
            store = SqliteStore(Path(tmp) / "bench.db", max_entries=20)
            await store.open()
            provider = OpenAIProvider(
                "main", model="m", api_key="k", base_url=llm.base_url,
                timeout=10.0, max_retries=0, max_tokens=256,
            )  # fmt: skip
            ids = [USER_ID + 1000 + i for i in range(users)]
            engine = Engine(
                EngineSettings(),
                store=store,
                provider=provider,
                access=AccessPolicy(allow=[f"discord:{i}" for i in ids]),
            )
            config = DiscordConfig.model_validate(
                {"enabled": True, "token": fake.token, "api_base": fake.api_base,
                 "gateway_url": fake.gateway_url, "edit_interval": 0.0}
            )  # fmt: skip
            bot = DiscordPlatform(
                config=config, handler=engine, commands=engine.commands,
                guild_ready_timeout=0.05,
            )  # fmt: skip
            engine.attach(bot.name, bot.outbox)
            await bot.start()
            latencies: list[float] = []

            async def user(uid: int, count: int, record: bool) -> None:
                dm = fake.dm_channel(uid)
                seen = fake.bot_texts(dm).count(REPLY)
                for n in range(count):
                    start = time.perf_counter()
                    await fake.send_dm(f"Frage {n}", author=uid)
                    want = seen + n + 1

                    def answered(dm: int = dm, want: int = want) -> bool:
                        return fake.bot_texts(dm).count(REPLY) >= want

                    await fake.wait_for(answered, within=30)
                    if record:
                        latencies.append(time.perf_counter() - start)

            await asyncio.gather(*(user(uid, 1, False) for uid in ids))  # warm-up
            cpu, wall = time.process_time(), time.perf_counter()
            await asyncio.gather(*(user(uid, per_user, True) for uid in ids))
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            await bot.stop_receiving()
            await engine.drain(5.0)
            await bot.aclose()
            await provider.aclose()
            await store.aclose()
    answered = users * per_user
    return {
        "answered": answered,
        "msgs_per_s": answered / wall,
        "cpu_ms_per_msg": 1000 * cpu / answered,
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * statistics.quantiles(latencies, n=20)[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--per-user", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    loads = [(args.users, args.per_user), (1, 10)]  # many users, then one user alone
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}; DMs, one event loop\n"
    )
    print("| load | messages/s | CPU per answered message | p50 | p95 |")
    print("|---|---:|---:|---:|---:|")
    for users, per_user in loads:
        r = asyncio.run(run(users, per_user))
        print(
            f"| {users} users x {per_user} DMs | {r['msgs_per_s']:.1f} "
            f"| {r['cpu_ms_per_msg']:.1f} ms | {r['p50_ms']:.0f} ms | {r['p95_ms']:.0f} ms |"
        )


if __name__ == "__main__":
    main()
