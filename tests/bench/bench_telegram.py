"""Messages/s and added latency through PTB + engine + openai SDK against both fakes.

Run: `python3 -m tests.bench.bench_telegram [--scale 1.0] [--ttft 0] [--same-loop]`.

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
as the adapter configures it ("on") and removed ("off", a diagnostic only);
per load the two run back to back in alternating order (on, off, off, on for
`--repeats 2`), so they meet the same machine.

The fakes and the driver run on their own event loop in a daemon thread (the
"outside world"), the bot on the main loop; both share one GIL, so absolute
numbers are pessimistic. `--same-loop` puts everything on one loop instead.
`--ttft 0.3` makes the fake LLM wait before its first delta, as a real one
does (then the typing action is sent; with an instant fake it is cancelled).
Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import platform
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import openai
import telegram as ptb
from aiohttp import web

from chatbridge.config import TelegramConfig
from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.core.models import IncomingMessage
from chatbridge.platforms.base import Outbox
from chatbridge.platforms.telegram import TelegramPlatform
from chatbridge.providers.openai import OpenAIProvider
from chatbridge.stores.sqlite import SqliteStore
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.sse import Reply

REPLY = "Das Paket kommt am Mittwoch."
CHUNK_CHARS = 10  # three deltas
FIRST_USER = 700_000_000
WARMUP = 1  # messages per chat before the clock starts (connections, sessions)
ANSWER_TIMEOUT = 30.0
TAG = re.compile(r"#c(\d+)m(\d+)")
PER_CHAT = 8  # every chat's session ends at the same length in every row
# (concurrent chats, chats in all): 8 chats one after another, 20 in two waves, 50 at once
PLAN = ((1, 8), (10, 20), (50, 50))
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

    def __init__(self, ttft: float) -> None:
        super().__init__(default_text=REPLY, chunk_chars=CHUNK_CHARS)
        self.ttft = ttft
        self.entered: dict[Key, float] = {}

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        entered = time.perf_counter()
        if self.ttft:  # one step per request: each handler pops one
            self.script(Reply(first_chunk_delay=self.ttft))
        try:
            return await super()._handle(request)
        finally:
            with contextlib.suppress(Exception):  # the body was read (and cached) above
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
    """The real engine behind a stopwatch: records when `accept` is entered."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.commands = engine.commands
        self.handled: dict[Key, float] = {}

    def attach(self, platform: str, outboxes: Callable[[IncomingMessage], Outbox]) -> None:
        self._engine.attach(platform, outboxes)

    async def accept(self, message: IncomingMessage) -> bool:
        key = tag_of(message.text)
        if key is not None:
            self.handled[key] = time.perf_counter()
        return await self._engine.accept(message)


class Outside:
    """Where the fakes and the driver run: a loop in a daemon thread, or the caller's."""

    def __init__(self, *, same_loop: bool) -> None:
        self.same_loop = same_loop
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
    cpu: dict[str, float]  # CPU seconds in the measured phase: bot, fakes, process


def cpu_now(bot_clock: int | None) -> dict[str, float]:
    """CPU seconds so far: the bot's thread, this (the outside) thread, the process."""
    bot = time.clock_gettime(bot_clock) if bot_clock is not None else math.nan
    return {"bot": bot, "fakes": time.thread_time(), "process": time.process_time()}


async def drive(
    telegram: TimedTelegram, concurrency: int, chats: int, per_chat: int, bot_clock: int | None
) -> Driven:
    """`concurrency` users at a time; each chat sends `per_chat` messages in turn.

    Chats `chats .. chats + concurrency - 1` only warm up (connections, first
    calls) before the clock starts; their messages are not measured.
    """
    pushed: dict[Key, float] = {}
    visible: dict[Key, float] = {}
    update_ids: dict[Key, int] = {}
    loop = asyncio.get_running_loop()
    todo = list(range(chats))

    async def converse(chat: int, count: int) -> None:
        user = FIRST_USER + chat
        for index in range(count):
            key = (chat, index)
            done: asyncio.Future[float] = loop.create_future()
            telegram.waiters[user] = (len(telegram.bot_texts(user)) + 1, done)
            pushed[key] = time.perf_counter()
            update_ids[key] = telegram.push_text(user, user, f"Wo ist mein Paket? #c{chat}m{index}")
            visible[key] = await asyncio.wait_for(done, ANSWER_TIMEOUT)

    async def user() -> None:
        while todo:
            await converse(todo.pop(0), per_chat)

    await asyncio.gather(*(converse(chats + w, WARMUP) for w in range(concurrency)))
    calls_before = len(telegram.calls)
    cpu = cpu_now(bot_clock)
    wall = time.perf_counter()
    await asyncio.gather(*(user() for _ in range(concurrency)))
    wall = time.perf_counter() - wall
    cpu = {k: v - cpu[k] for k, v in cpu_now(bot_clock).items()}
    calls = Counter(call.method for call in telegram.calls[calls_before:])
    for key in [k for k in pushed if k[0] >= chats]:
        del pushed[key], visible[key], update_ids[key]
    return Driven(pushed, visible, update_ids, wall, calls, cpu)


async def open_fakes(ttft: float) -> tuple[TimedTelegram, TimedOpenAI]:
    telegram, llm = TimedTelegram(), TimedOpenAI(ttft)
    await telegram.__aenter__()
    await llm.__aenter__()
    return telegram, llm


async def close_fakes(telegram: TimedTelegram, llm: TimedOpenAI) -> None:
    await llm.__aexit__(None, None, None)
    await telegram.__aexit__(None, None, None)


def telegram_config(telegram: FakeTelegram) -> TelegramConfig:
    return TelegramConfig.model_validate(
        {"enabled": True, "token": telegram.token, "base_url": telegram.base_url}
    )


async def scenario(
    outside: Outside,
    concurrency: int,
    chats: int,
    per_chat: int,
    *,
    limiter: bool,
    ttft: float,
    db: Path,
) -> dict[str, Any]:
    telegram, llm = await outside.run(open_fakes(ttft))
    store = SqliteStore(db, max_entries=20)
    await store.open()
    provider = OpenAIProvider(
        "main", model="m", api_key="k", base_url=llm.base_url,
        timeout=10.0, max_retries=0, max_tokens=256,
    )  # fmt: skip
    allow = [f"telegram:{FIRST_USER + chat}" for chat in range(chats + concurrency)]
    engine = TimedEngine(
        Engine(EngineSettings(), store=store, provider=provider, access=AccessPolicy(allow=allow))
    )
    bot = TelegramPlatform(
        config=telegram_config(telegram), handler=engine, commands=engine.commands
    )
    engine.attach(bot.name, bot.outbox)
    if not limiter:
        bot._bot._rate_limiter = None  # diagnostic only: what the pacing costs
    bot_clock = None if outside.same_loop else time.pthread_getcpuclockid(threading.get_ident())
    try:
        await bot.start()
        driven = await outside.run(drive(telegram, concurrency, chats, per_chat, bot_clock))
    finally:
        await bot.stop_receiving()
        await engine._engine.drain(10.0)
        await bot.aclose()
        await provider.aclose()
        await store.aclose()
        await outside.run(close_fakes(telegram, llm))
    return summarize(driven, telegram, llm, engine) | {
        "concurrency": concurrency,
        "chats": chats,
        "per_chat": per_chat,
        "limiter": "on" if limiter else "off",
    }


def summarize(
    driven: Driven, telegram: TimedTelegram, llm: TimedOpenAI, engine: TimedEngine
) -> dict[str, Any]:
    server = llm.server_seconds()
    keys = sorted(driven.visible)
    total = [driven.visible[k] - driven.pushed[k] for k in keys]
    added = [t - server[k] for t, k in zip(total, keys, strict=True)]
    count = len(keys)
    return {
        "messages": count,
        "msgs_per_s": count / driven.wall,
        "total": total,
        "fake_llm": [server[k] for k in keys],
        "added": added,
        "by_position": {
            index: [a for a, k in zip(added, keys, strict=True) if k[1] == index]
            for index in sorted({k[1] for k in keys})
        },
        "pickup": [telegram.served_at[driven.update_ids[k]] - driven.pushed[k] for k in keys],
        "inbound": [engine.handled[k] - driven.pushed[k] for k in keys],
        "to_llm": [llm.entered[k] - engine.handled[k] for k in keys],
        "out": [driven.visible[k] - llm.entered[k] - server[k] for k in keys],
        "calls": {m: driven.calls[m] / count for m in METHODS},
        "cpu": {k: v / count * 1000 for k, v in driven.cpu.items()},
    }


def ms(values: list[float], q: int = 50) -> float:
    """The q-th percentile of `values` (seconds), in ms."""
    if len(values) == 1:
        return values[0] * 1000
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000


async def run(scale: float, ttft: float, same_loop: bool, repeats: int) -> list[dict[str, Any]]:
    """Per load, limiter on and off back to back, the order alternating
    (on, off, off, on, ...) so both meet the same machine; `repeats` pairs."""
    outside = Outside(same_loop=same_loop)
    results: list[dict[str, Any]] = []
    try:
        for concurrency, planned in PLAN:
            chats = max(concurrency, round(planned * scale))
            for repeat in range(repeats):
                for limiter in (True, False) if repeat % 2 == 0 else (False, True):
                    with tempfile.TemporaryDirectory() as tmp:
                        db = Path(tmp) / "bench.db"
                        row = await scenario(
                            outside, concurrency, chats, PER_CHAT, limiter=limiter, ttft=ttft,
                            db=db,
                        )  # fmt: skip
                    results.append(row | {"run": len(results) + 1})
    finally:
        outside.close()
    return results


def print_tables(results: list[dict[str, Any]]) -> None:
    print(
        "| run | concurrent chats | PTB rate limiter | msgs | msgs/s | p50 e2e ms | p99 e2e ms "
        "| p50 fake LLM ms | p50 added ms | p99 added ms |"
    )
    print("|---:|---:|:---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['run']} | {r['concurrency']} | {r['limiter']} | {r['messages']} "
            f"| {r['msgs_per_s']:.1f} "
            f"| {ms(r['total']):.1f} | {ms(r['total'], 99):.1f} | {ms(r['fake_llm']):.1f} "
            f"| {ms(r['added']):.1f} | {ms(r['added'], 99):.1f} |"
        )
    print(
        "\nWhere it goes (p50 ms per message; CPU ms per message: bot thread / fakes thread "
        "/ whole process; Bot API calls per message):\n"
    )
    print(
        "| concurrent chats | PTB rate limiter | push→getUpdates answer | push→engine.handle "
        "| engine→LLM request | LLM done→text visible | CPU bot / fakes / all "
        "| chatAction + send + edit | getUpdates |"
    )
    print("|---:|:---:|---:|---:|---:|---:|:---|:---|---:|")
    for r in results:
        c, cpu = r["calls"], r["cpu"]
        print(
            f"| {r['concurrency']} | {r['limiter']} | {ms(r['pickup']):.1f} "
            f"| {ms(r['inbound']):.1f} | {ms(r['to_llm']):.1f} | {ms(r['out']):.1f} "
            f"| {cpu['bot']:.1f} / {cpu['fakes']:.1f} / {cpu['process']:.1f} "
            f"| {c['sendChatAction']:.2f} + {c['sendMessage']:.2f} + {c['editMessageText']:.2f} "
            f"| {c['getUpdates']:.2f} |"
        )
    solo = next(r for r in results if r["concurrency"] == 1 and r["limiter"] == "off")
    positions = solo["by_position"]
    print(
        "\np50 added ms by position in the chat (1 chat, limiter off; "
        "message n carries 2n-1 prior turns):\n"
    )
    print("| " + " | ".join(f"#{i + 1}" for i in positions) + " |")
    print("|" + "---:|" * len(positions))
    print("| " + " | ".join(f"{ms(v):.1f}" for v in positions.values()) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies chats per row")
    parser.add_argument("--ttft", type=float, default=0.0, help="fake LLM's first-delta delay, s")
    parser.add_argument("--same-loop", action="store_true", help="fakes on the bot's loop")
    parser.add_argument("--repeats", type=int, default=2, help="on/off pairs per load")
    args = parser.parse_args()
    # A typing action cancelled mid-request makes the fake log a reset connection.
    resets = ResetCounter()
    logging.getLogger("aiohttp.server").addFilter(resets)
    started = time.perf_counter()
    results = asyncio.run(run(args.scale, args.ttft, args.same_loop, args.repeats))
    layout = "one event loop" if args.same_loop else "fakes + driver on a second loop/thread"
    print(
        f"# FakeTelegram -> PTB {ptb.__version__} -> engine -> openai {openai.__version__} "
        f"-> FakeOpenAI ({layout}; fake LLM first delta after {args.ttft:g} s)\n"
    )
    print_tables(results)
    print(
        f"\nMachine: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]} ({platform.system()}); "
        f"load average {os.getloadavg()[0]:.2f} at the end; "
        f"{resets.count} requests reset by the client; "
        f"total runtime {time.perf_counter() - started:.0f} s"
    )


class ResetCounter(logging.Filter):
    """Counts (and hides) the fakes' tracebacks for requests the client hung up on."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], ConnectionResetError):
            self.count += 1
            return False
        return True


if __name__ == "__main__":
    main()
