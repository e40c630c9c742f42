"""Telegram API calls per answer, with drafts (`platforms.telegram.drafts: true`) and without.

Run: `python3 -m tests.bench.bench_telegram_drafts [--answers 8] [--interval 0.2] [--group]`.

The real stack in one process: `FakeTelegram` -> python-telegram-bot (polling,
`AIORateLimiter`) -> `TelegramPlatform` -> `Engine` (SQLite on a temp dir) ->
`OpenAIProvider` (openai SDK) -> `FakeOpenAI`. Each answer streams for about
`--stream` seconds (so an `edit_interval` of `--interval` gives several
progress updates); one chat asks `--answers` questions one after another.
Rows: a short answer (one message) and a long one (past 4,096 characters,
three messages), each in a private chat with drafts and without; `--group`
adds a group (which never gets drafts; PTB's limiter allows a group 20
messages a minute, so those rows take minutes and show fewer edits). Counted
per answer, from the fake's call log: `sendMessage`, `editMessageText` (these
two use the chat's message budget), `sendMessageDraft`, `sendChatAction`.
Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
from collections import Counter
from pathlib import Path

from chatbridge.config import TelegramConfig
from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.platforms.telegram import TelegramPlatform
from chatbridge.providers.openai import OpenAIProvider
from chatbridge.stores.sqlite import SqliteStore
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.sse import Reply

USER, GROUP = 579304651, -1001234
METHODS = ("sendMessage", "editMessageText", "sendMessageDraft", "sendChatAction")
SHORT = " ".join(f"Schritt{i}" for i in range(120)) + "."  # ~1,200 chars: one message
LONG = "\n\n".join(f"Absatz {i}: " + "Die Sendung ist unterwegs. " * 12 for i in range(28))


async def measure(
    *, text: str, drafts: bool, group: bool, answers: int, interval: float, stream: float
) -> Counter[str]:
    """Calls of each method into the chat, summed over `answers` answers."""
    chunks = 40
    size = max(1, len(text) // chunks + 1)
    async with FakeTelegram() as telegram, FakeOpenAI() as llm:
        llm.script(
            *[Reply(text=text, chunk_chars=size, chunk_delay=stream / chunks)] * (answers + 1)
        )
        with tempfile.TemporaryDirectory() as tmp:
            store = SqliteStore(Path(tmp) / "bench.db", max_entries=20)
            await store.open()
            provider = OpenAIProvider(
                "main", model="m", api_key="k", base_url=llm.base_url,
                timeout=10.0, max_retries=0, max_tokens=256,
            )  # fmt: skip
            allow = (f"telegram:{USER}", f"telegram:{GROUP}")
            engine = Engine(
                EngineSettings(), store=store, provider=provider,
                access=AccessPolicy(allow=allow),
            )  # fmt: skip
            config = TelegramConfig.model_validate({
                "enabled": True, "token": telegram.token, "base_url": telegram.base_url,
                "edit_interval": interval, "drafts": drafts,
            })  # fmt: skip
            bot = TelegramPlatform(config=config, handler=engine, commands=engine.commands)
            engine.attach(bot.name, bot.outbox)
            chat = GROUP if group else USER
            try:
                await bot.start()
                for index in range(answers):
                    if group:
                        telegram.push_text(chat, USER, f"@bridge_bot Frage {index}",
                                           chat_type="supergroup")  # fmt: skip
                    else:
                        telegram.push_text(chat, USER, f"Frage {index}")
                    await _until_remembered(store, f"telegram:{USER}", index + 1)
            finally:
                await bot.stop_receiving()
                await engine.drain(5.0)
                await bot.aclose()
                await provider.aclose()
                await store.aclose()
        return Counter(
            c.method for c in telegram.calls
            if c.method in METHODS and c.params.get("chat_id") == chat
        )  # fmt: skip


async def _until_remembered(store: SqliteStore, user: str, count: int) -> None:
    for _ in range(3000):
        if len(await store.ring(user, since=0.0)) >= count:
            return
        await asyncio.sleep(0.01)
    raise RuntimeError("an answer was not remembered in time")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", type=int, default=8)
    parser.add_argument("--interval", type=float, default=0.2, help="edit_interval, seconds")
    parser.add_argument("--stream", type=float, default=1.6, help="seconds an answer streams")
    parser.add_argument("--group", action="store_true", help="add group rows (slow)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    print(
        f"edit_interval {args.interval:g} s, each answer streams ~{args.stream:g} s, "
        f"{args.answers} answers per row; calls per answer into the chat\n"
    )
    head = "| answer | chat | drafts | " + " | ".join(METHODS)
    print(head + " | message budget (send+edit) | all calls |")
    print("|---|---|---|" + "---:|" * (len(METHODS) + 2))
    rows = [("short", SHORT), ("long (3 messages)", LONG)]
    for name, text in rows:
        kinds = [("private", True, False), ("private", False, False)]
        if args.group:
            kinds.append(("group", True, True))
        for chat, drafts, group in kinds:
            counts = await measure(
                text=text, drafts=drafts, group=group, answers=args.answers,
                interval=args.interval, stream=args.stream,
            )  # fmt: skip
            per = [counts[m] / args.answers for m in METHODS]
            budget = per[0] + per[1]
            cells = " | ".join(f"{value:.1f}" for value in per)
            flag = "on" if drafts and not group else "off"
            print(f"| {name} | {chat} | {flag} | {cells} | {budget:.1f} | {sum(per):.1f} |")


if __name__ == "__main__":
    asyncio.run(main())
