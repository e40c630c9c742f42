"""20 chats at once: time to the final answer, and calls per second.

Run: `python3 -m tests.bench.bench_concurrency [--chats 20] [--rounds 3]`.

Telegram: the real stack in one process (fake Bot API -> python-telegram-bot
-> `TelegramPlatform` -> engine on SQLite -> openai SDK -> fake OpenAI, an
answer streaming for about 3 s, `edit_interval` 1 s as by default or `--interval`). All
chats send one message at the same moment; "to final" runs from then to the
chat's last `sendMessage`/`editMessageText` (the final text visible). Rows:
drafts on and off, each with PTB's `AIORateLimiter` (what chatbridge used
before, one first-come queue for every chat call, swapped in through a
private attribute: a diagnostic) and with `TelegramPacer` (per chat, per bot,
final text first); rounds alternate the order. "busiest second" is the most
calls to chats in any 1 s window (Telegram's limit: ~30), "busiest chat" the
most messages (send + edit) one chat got in any 1 s window.

Discord: the same with discord.py against the fake Discord (REST + gateway),
20 users DMing at once; "busiest second" counts REST calls into channels in
any 1 s window (Discord's global limit: 50), with the reply budget on (25/s,
bursts of 10, final text first) and off (a diagnostic).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import logging
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from telegram.ext import AIORateLimiter

from chatbridge.config import DiscordConfig, TelegramConfig
from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.platforms._pacing import RateBudget
from chatbridge.platforms.discord import DiscordPlatform
from chatbridge.platforms.telegram import TelegramPlatform
from chatbridge.providers.openai import OpenAIProvider
from chatbridge.stores.sqlite import SqliteStore
from tests.support.fake_discord import USER_ID, FakeDiscord
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.sse import Reply

FIRST_USER = 700_000_000
ANSWER = "Die Sendung ist unterwegs und kommt voraussichtlich am Mittwoch an. " * 12
CHUNKS, STREAM_SECONDS = 60, 3.0


def _busiest(times: Sequence[float], window: float = 1.0) -> int:
    times = sorted(times)
    return max((bisect.bisect_right(times, t + window) - i for i, t in enumerate(times)), default=0)


def _script(llm: FakeOpenAI, count: int) -> None:
    size = len(ANSWER) // CHUNKS + 1
    reply = Reply(text=ANSWER, chunk_chars=size, chunk_delay=STREAM_SECONDS / CHUNKS)
    llm.script(*[reply] * count)


@contextlib.asynccontextmanager
async def _engine(llm: FakeOpenAI, db: Path, allow: list[str]) -> AsyncIterator[Engine]:
    """An engine on a fresh SQLite store at `db`, answering through `llm`;
    its store and provider are closed after the platform on it."""
    store = SqliteStore(db, max_entries=20)
    await store.open()
    provider = OpenAIProvider(
        "main", model="m", api_key="k", base_url=llm.base_url,
        timeout=30.0, max_retries=0, max_tokens=256,
    )  # fmt: skip
    try:
        yield Engine(
            EngineSettings(), store=store, provider=provider, access=AccessPolicy(allow=allow)
        )
    finally:
        await provider.aclose()
        await store.aclose()


async def telegram_round(
    chats: int, *, drafts: bool, pacer: bool, interval: float, home: Path
) -> dict[str, Any]:
    users = [FIRST_USER + i for i in range(chats)]
    db = home / f"tg-{drafts}-{pacer}-{time.monotonic_ns()}.db"
    async with (
        FakeTelegram() as telegram,
        FakeOpenAI() as llm,
        _engine(llm, db, [f"telegram:{u}" for u in users]) as engine,
    ):
        _script(llm, chats)
        config = TelegramConfig.model_validate({
            "enabled": True, "token": telegram.token, "base_url": telegram.base_url,
            "drafts": drafts, "edit_interval": interval,
        })  # fmt: skip
        bot = TelegramPlatform(config=config, handler=engine, commands=engine.commands)
        if not pacer:
            bot._bot._rate_limiter = AIORateLimiter(max_retries=0)  # diagnostic: the old way
        engine.attach(bot.name, bot.outbox)
        try:
            await bot.start()
            start = time.monotonic()
            for user in users:
                telegram.push_text(user, user, f"Wo ist mein Paket, {user}?")

            def done() -> bool:
                return all("".join(telegram.bot_texts(u)).strip() == ANSWER.strip() for u in users)

            await telegram.wait_for(done, within=120)
        finally:
            await bot.stop_receiving()
            await engine.drain(10.0)
            await bot.aclose()
        calls = [c for c in telegram.calls if c.at >= start and "chat_id" in c.params]
    final = []
    for user in users:
        shown = [
            c.at for c in calls
            if c.params.get("chat_id") == user and c.method in ("sendMessage", "editMessageText")
        ]  # fmt: skip
        final.append(max(shown) - start)
    per_chat = max(
        _busiest([
            c.at for c in calls
            if c.params.get("chat_id") == u and c.method in ("sendMessage", "editMessageText")
        ])
        for u in users
    )  # fmt: skip
    return {
        "final": final,
        "busiest": _busiest([c.at for c in calls]),
        "per_chat": per_chat,
        "calls": len(calls) / chats,
    }


async def discord_round(
    users_count: int, *, paced: bool, interval: float, home: Path
) -> dict[str, Any]:
    users = [USER_ID + i for i in range(users_count)]
    db = home / f"dc-{paced}-{time.monotonic_ns()}.db"
    async with (
        FakeDiscord() as discord,
        FakeOpenAI() as llm,
        _engine(llm, db, [f"discord:{u}" for u in users]) as engine,
    ):
        _script(llm, users_count)
        config = DiscordConfig.model_validate({
            "enabled": True, "token": discord.token, "api_base": discord.api_base,
            "gateway_url": discord.gateway_url, "edit_interval": interval,
        })  # fmt: skip
        platform = DiscordPlatform(config=config, handler=engine, commands=engine.commands)
        if not paced:
            platform._pace = RateBudget(1e9, burst=1e9)  # diagnostic: no reply budget
        engine.attach(platform.name, platform.outbox)
        try:
            await platform.start()
            start = time.monotonic()
            await asyncio.gather(*(discord.send_dm(f"Paket {u}?", author=u) for u in users))

            def done() -> bool:
                return all(
                    "".join(discord.bot_texts(discord.dm_channel(u))).strip() == ANSWER.strip()
                    for u in users
                )

            await discord.wait_for(done, within=120)
        finally:
            await platform.stop_receiving()
            await engine.drain(10.0)
            await platform.aclose()
        calls = [c for c in discord.calls if c.at >= start and c.path.startswith("/channels/")]
        calls = [c for c in calls if c.method in ("POST", "PATCH")]
        final = []
        for user in users:
            channel = discord.dm_channel(user)
            shown = [c.at for c in calls if c.path.startswith(f"/channels/{channel}/messages")]
            final.append(max(shown) - start)
    return {"final": final, "busiest": _busiest([c.at for c in calls]), "calls": len(calls)}


def _row(name: str, results: list[dict[str, Any]], chats: int, extra: str = "") -> str:
    finals = [f for r in results for f in r["final"]]
    busiest = max(r["busiest"] for r in results)
    p50, p90 = statistics.median(finals), statistics.quantiles(finals, n=10)[-1]
    return f"| {name} | {p50:.2f} | {p90:.2f} | {busiest} |{extra}"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--interval", type=float, default=1.0, help="edit_interval, seconds")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    print(
        f"# {args.chats} chats at once, {args.rounds} rounds, answers stream ~{STREAM_SECONDS} s, "
        f"edit_interval {args.interval:g} s; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs\n"
    )
    kinds = [(d, p) for d in (True, False) for p in (False, True)]
    results: dict[tuple[bool, bool], list[dict[str, Any]]] = {k: [] for k in kinds}
    dc: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.rounds):
            for drafts, pacer in kinds if n % 2 == 0 else reversed(kinds):
                results[(drafts, pacer)].append(
                    await telegram_round(
                        args.chats,
                        drafts=drafts,
                        pacer=pacer,
                        interval=args.interval,
                        home=Path(tmp),
                    )
                )
            for paced in (False, True) if n % 2 == 0 else (True, False):
                dc[paced].append(
                    await discord_round(
                        args.chats, paced=paced, interval=args.interval, home=Path(tmp)
                    )
                )
    print("Telegram (private chats):\n")
    print("| drafts, limiter | to final p50 s | p90 s | busiest second (calls) | busiest chat "
          "(msgs in 1 s) | calls per answer |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    for drafts, pacer in kinds:
        rs = results[(drafts, pacer)]
        name = f"drafts {'on' if drafts else 'off'}, " + (
            "TelegramPacer" if pacer else "AIORateLimiter (before)"
        )
        extra = (
            f" {max(r['per_chat'] for r in rs)} | {statistics.fmean(r['calls'] for r in rs):.1f} |"
        )
        print(_row(name, rs, args.chats, extra))
    print("\nDiscord (DMs):\n")
    print(
        "| reply budget | to final p50 s | p90 s | busiest second (REST calls) | calls per answer |"
    )
    print("|---|---:|---:|---:|---:|")
    for paced in (False, True):
        rs = dc[paced]
        extra = f" {statistics.fmean(r['calls'] for r in rs) / args.chats:.1f} |"
        print(_row("on (25/s, bursts of 10)" if paced else "off (before)", rs, args.chats, extra))


if __name__ == "__main__":
    asyncio.run(main())
