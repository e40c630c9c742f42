"""Issue 17.9 over the real Telegram SDK: a waiting message's inbox row keeps no name."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from tests.platforms.telegram.conftest import Launch
from tests.support.fake_telegram import FakeTelegram
from tests.support.fakes import ScriptedProvider
from tests.support.testbot import ALICE, TestBots

NEEDED = {"platform", "chat", "user", "thread", "kind", "text", "event_id", "reply_address"}


async def test_a_waiting_telegram_message_is_stored_without_the_senders_name(
    fake: FakeTelegram, launch: Launch, tmp_path: Path, testbot: TestBots
) -> None:
    gate = asyncio.Event()  # the answer waits, so the inbox row stays pending
    bot = await testbot(provider=ScriptedProvider("ok", gate=gate))
    try:
        await launch(engine=bot.engine)
        fake.push_text(int(ALICE), int(ALICE), "Wo bleibt das Paket?")
        db = tmp_path / "bot.db"

        def pending() -> list[str]:
            with sqlite3.connect(db) as conn:
                rows = conn.execute("SELECT message FROM inbox WHERE done_at IS NULL").fetchall()
            return [r[0] for r in rows]

        await fake.wait_for(lambda: bool(pending()))
        [row] = pending()
        assert f"User{ALICE}" not in row  # the fake's first_name for the sender
        assert NEEDED <= set(json.loads(row))
        assert not {k for k in json.loads(row) if "name" in k}
        gate.set()
        await fake.wait_for(lambda: fake.bot_texts(int(ALICE)) == ["ok"])
    finally:
        await bot.engine.drain(1.0)
