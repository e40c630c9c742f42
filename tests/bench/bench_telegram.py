"""Messages/s and added latency through PTB + engine + openai SDK against both fakes.

Run: `python3 -m tests.bench.bench_telegram [--scale 1.0] [--same-loop]`.

The real stack, in-process: `FakeTelegram` -> python-telegram-bot (long
polling, `AIORateLimiter`) -> `TelegramPlatform` -> `Engine` (SQLite on a temp
dir) -> `OpenAIProvider` (openai SDK) -> `FakeOpenAI`, and the answer back out
through `TelegramOutbox`. Every user has a private chat of their own and sends
their messages one after another: the next one is pushed only once the whole
answer is visible in the fake (its final text equals the fake LLM's reply).

Per message: end to end = push -> final text stored by the fake Bot API;
fake LLM = the OpenAI fake's `server_seconds`; added = end to end - fake LLM;
push -> engine = push -> `engine.handle` entered (long-poll pickup, PTB's
parsing and dispatch). Each row runs a fresh stack, with PTB's rate limiter
as the adapter configures it ("on") and removed ("off", a diagnostic only).

The fakes and the driver run on their own event loop in a daemon thread (the
"outside world"), the bot on the main loop; both share one GIL, so absolute
numbers are pessimistic. `--same-loop` puts everything on one loop instead.
Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

from aiohttp import web
from pydantic import SecretStr

from core.access import AccessPolicy
from core.engine import Engine, EngineSettings
from core.models import IncomingMessage
from core.store import SqliteStore
from platforms.base import Outbox
from platforms.telegram import TelegramPlatform
from providers.openai import OpenAIProvider
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram

REPLY = "Das Paket kommt am Mittwoch."
CHUNK_CHARS = 10  # three deltas
FIRST_USER = 700_000_000
WARMUP = 1  # messages per chat before the clock starts (connections, sessions)
ANSWER_TIMEOUT = 30.0
TAG = re.compile(r"#c(\d+)m(\d+)")
# (concurrent chats, messages per chat) with the limiter on / off
PLAN_ON = ((1, 40), (10, 10), (50, 5))
PLAN_OFF = ((1, 200), (10, 40), (50, 10))
METHODS = ("sendChatAction", "sendMessage", "editMessageText", "getUpdates")

T = TypeVar("T")
Key = tuple[int, int]  # (chat index, message index)


def tag_of(text: str) -> Key | None:
    found = TAG.findall(text)
    return (int(found[-1][0]), int(found[-1][1])) if found else None


class TimedTelegram(FakeTelegram):
    """The fake Bot API, plus the moment each awaited answer became visible."""

    def __init__(self) -> None:
        super().__init__()
        self.waiters: dict[int, tuple[int, asyncio.Future[float]]] = {}
        self.served_at: dict[int, float] = {}  # update_id -> first getUpdates answer

    async def _api_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        result = await super()._api_getUpdates(params)
        now = time.perf_counter()
        for update in result:
            self.served_at.setdefault(update["update_id"], now)
        return result

    async def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        result = await super()._api_sendMessage(params)
        self._check(int(params["chat_id"]))
        return result

    async def _api_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:
        result = await super()._api_editMessageText(params)
        self._check(int(params["chat_id"]))
        return result

    def _check(self, chat_id: int) -> None:
        waiter = self.waiters.get(chat_id)
        if waiter is None or waiter[1].done():
            return
        texts = self.bot_texts(chat_id)
        if len(texts) == waiter[0] and texts[-1] == REPLY:
            waiter[1].set_result(time.perf_counter())


class TimedOpenAI(FakeOpenAI):
    """The fake LLM, plus when each request reached its handler (by message tag)."""

    def __init__(self) -> None:
        super().__init__(default_text=REPLY, chunk_chars=CHUNK_CHARS)
        self.entered: dict[Key, float] = {}

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        entered = time.perf_counter()
        try:
            return await super()._handle(request)
        finally:
            key = tag_of(str((await request.json())["messages"][-1]["content"]))
            if key is not None:
                self.entered[key] = entered

    def server_seconds(self) -> dict[Key, float]:
        out = {}
        for record in self.requests:
            key = tag_of(str(record.body["messages"][-1]["content"]))
            if key is not None:
                out[key] = record.server_seconds
        return out


class TimedEngine:
    """The real engine behind a stopwatch: records when `handle` is entered."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.commands = engine.commands
        self.handled: dict[Key, float] = {}

    async def handle(self, message: IncomingMessage, outbox: Outbox) -> None:
        key = tag_of(message.text)
        if key is not None:
            self.handled[key] = time.perf_counter()
        await self._engine.handle(message, outbox)


class Outside:
    """Where the fakes and the driver run: a loop in a daemon thread, or the caller's."""

    def __init__(self, *, same_loop: bool) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        if not same_loop:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
            self._thread.start()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    def close(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()


@dataclass(slots=True)
class Driven:
    pushed: dict[Key, float]
    visible: dict[Key, float]
    update_ids: dict[Key, int]
    wall: float
    calls: Counter[str]


async def drive(telegram: TimedTelegram, chats: int, per_chat: int) -> Driven:
    """Each chat sends `WARMUP + per_chat` messages, each after the previous answer."""
    pushed: dict[Key, float] = {}
    visible: dict[Key, float] = {}
    update_ids: dict[Key, int] = {}
    loop = asyncio.get_running_loop()

    async def converse(chat: int, first: int, count: int) -> None:
        user = FIRST_USER + chat
        for index in range(first, first + count):
            key = (chat, index)
            done: asyncio.Future[float] = loop.create_future()
            telegram.waiters[user] = (len(telegram.bot_texts(user)) + 1, done)
            pushed[key] = time.perf_counter()
            update_ids[key] = telegram.push_text(user, user, f"Wo ist mein Paket? #c{chat}m{index}")
            visible[key] = await asyncio.wait_for(done, ANSWER_TIMEOUT)

    await asyncio.gather(*(converse(chat, 0, WARMUP) for chat in range(chats)))
    calls_before = len(telegram.calls)
    wall = time.perf_counter()
    await asyncio.gather(*(converse(chat, WARMUP, per_chat) for chat in range(chats)))
    wall = time.perf_counter() - wall
    calls = Counter(call.method for call in telegram.calls[calls_before:])
    return Driven(pushed, visible, update_ids, wall, calls)


async def open_fakes() -> tuple[TimedTelegram, TimedOpenAI]:
    telegram, llm = TimedTelegram(), TimedOpenAI()
    await telegram.__aenter__()
    await llm.__aenter__()
    return telegram, llm


async def close_fakes(telegram: TimedTelegram, llm: TimedOpenAI) -> None:
    await llm.__aexit__(None, None, None)
    await telegram.__aexit__(None, None, None)


def telegram_config(telegram: FakeTelegram) -> SimpleNamespace:
    return SimpleNamespace(
        token=SecretStr(telegram.token),
        mode="polling",
        base_url=telegram.base_url,
        webhook_url="",
        webhook_secret=None,
        edit_interval=1.0,
    )


async def scenario(
    outside: Outside, chats: int, per_chat: int, *, limiter: bool, db: Path
) -> dict[str, Any]:
    telegram, llm = await outside.run(open_fakes())
    store = SqliteStore(db, max_entries=20)
    await store.open()
    provider = OpenAIProvider(
        "main", model="m", api_key="k", base_url=llm.base_url,
        timeout=10.0, max_retries=0, max_tokens=256,
    )  # fmt: skip
    allow = [f"telegram:{FIRST_USER + chat}" for chat in range(chats)]
    engine = TimedEngine(
        Engine(EngineSettings(), store=store, provider=provider, access=AccessPolicy(allow=allow))
    )
    bot = TelegramPlatform(config=telegram_config(telegram), engine=engine)
    if not limiter:
        bot._app.bot._rate_limiter = None  # diagnostic only: what the pacing costs
    try:
        await bot.start()
        driven = await outside.run(drive(telegram, chats, per_chat))
    finally:
        await bot.aclose()
        await provider.aclose()
        await store.aclose()
        await outside.run(close_fakes(telegram, llm))
    return summarize(driven, telegram, llm, engine, chats, per_chat)


def summarize(
    driven: Driven,
    telegram: TimedTelegram,
    llm: TimedOpenAI,
    engine: TimedEngine,
    chats: int,
    per_chat: int,
) -> dict[str, Any]:
    server = llm.server_seconds()
    keys = [key for key in driven.visible if key[1] >= WARMUP]
    total = [driven.visible[k] - driven.pushed[k] for k in keys]
    fake_llm = [server[k] for k in keys]
    added = [t - s for t, s in zip(total, fake_llm, strict=True)]
    inbound = [engine.handled[k] - driven.pushed[k] for k in keys]
    pickup = [telegram.served_at[driven.update_ids[k]] - driven.pushed[k] for k in keys]
    to_llm = [llm.entered[k] - engine.handled[k] for k in keys]
    out = [driven.visible[k] - llm.entered[k] - server[k] for k in keys]
    per_message = {m: driven.calls[m] / len(keys) for m in METHODS}
    return {
        "chats": chats,
        "messages": len(keys),
        "per_chat": per_chat,
        "msgs_per_s": len(keys) / driven.wall,
        "total": total,
        "fake_llm": fake_llm,
        "added": added,
        "inbound": inbound,
        "pickup": pickup,
        "to_llm": to_llm,
        "out": out,
        "calls": per_message,
    }


def pct(values: list[float], q: int) -> float:
    """The q-th percentile in ms."""
    if len(values) == 1:
        return values[0] * 1000
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000


async def run(scale: float, same_loop: bool) -> list[dict[str, Any]]:
    outside = Outside(same_loop=same_loop)
    results = []
    try:
        for limiter, plan in ((True, PLAN_ON), (False, PLAN_OFF)):
            for chats, per_chat in plan:
                with tempfile.TemporaryDirectory() as tmp:
                    result = await scenario(
                        outside, chats, max(2, round(per_chat * scale)),
                        limiter=limiter, db=Path(tmp) / "bench.db",
                    )  # fmt: skip
                result["limiter"] = "on" if limiter else "off"
                results.append(result)
    finally:
        outside.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies messages per chat")
    parser.add_argument("--same-loop", action="store_true", help="fakes on the bot's loop")
    args = parser.parse_args()
    started = time.perf_counter()
    results = asyncio.run(run(args.scale, args.same_loop))
    layout = "one loop" if args.same_loop else "fakes on their own loop in a thread"
    print(
        f"# Telegram -> PTB -> engine -> openai SDK -> fake ({layout}) — "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    print(
        "| chats | PTB rate limiter | msgs | msgs/s | p50 e2e ms | p99 e2e ms "
        "| p50 fake LLM ms | p50 added ms | p99 added ms "
        "| p50 push→engine ms | p50 engine→LLM ms | p50 LLM end→visible ms "
        "| Bot API calls/msg (action+send+edit, getUpdates) |"
    )
    print("|---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---|")
    for r in results:
        c = r["calls"]
        print(
            f"| {r['chats']} | {r['limiter']} | {r['messages']} | {r['msgs_per_s']:.1f} "
            f"| {pct(r['total'], 50):.1f} | {pct(r['total'], 99):.1f} "
            f"| {pct(r['fake_llm'], 50):.1f} "
            f"| {pct(r['added'], 50):.1f} | {pct(r['added'], 99):.1f} "
            f"| {pct(r['inbound'], 50):.1f} | {pct(r['to_llm'], 50):.1f} "
            f"| {pct(r['out'], 50):.1f} "
            f"| {c['sendChatAction']:.2f}+{c['sendMessage']:.2f}+{c['editMessageText']:.2f}, "
            f"{c['getUpdates']:.2f} |"
        )
    print(f"\n(total runtime {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
