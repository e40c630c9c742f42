"""Issue 17.2 on Discord: a message the full inbox refused gets one notice and,
since Discord never sends it again, is read from the channel's history and
answered once the store takes writes again.

The store is made full the way SQLite reports a full disk (`PRAGMA
max_page_count` on the store's own connection; see
tests/platforms/telegram/test_full_store_intake.py).
"""

from __future__ import annotations

import re

from chatbridge.core.texts import say
from chatbridge.platforms.discord import DiscordPlatform
from tests.platforms.discord.conftest import ALLOWED, discord_config
from tests.support.fake_discord import FakeDiscord
from tests.support.fakes import ScriptedProvider
from tests.support.testbot import TestBots

NO_LIMIT = 1_073_741_823


async def test_refused_dms_get_one_notice_and_are_answered_once_space_is_back(
    fake: FakeDiscord, testbot: TestBots
) -> None:
    def marker(text: str) -> str:
        return (re.findall(r"\[\w+\]", text) or [text])[-1]

    provider = ScriptedProvider(lambda p: [f"echo: {marker(p.messages[-1].content)}"])
    bot = await testbot(provider=provider, allow=ALLOWED)
    platform = DiscordPlatform(
        config=discord_config(fake),
        handler=bot.engine,
        guild_ready_timeout=0.05,
        cursors=bot.engine.store,
        say=bot.engine.settings.say,
        retry_every=0.2,
    )
    bot.engine.attach(platform.name, platform.outbox)
    notice = say("de", "inbox_full")
    dm = fake.dm_channel()
    try:
        await platform.start()
        await fake.send_dm("vorher")
        await fake.wait_for(lambda: fake.bot_texts(dm) == ["echo: vorher"])  # no marker
        db = bot.sqlite._conn()
        db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
        padding = "Wo bleibt das Paket? " * 300  # needs new pages: refused
        await fake.send_dm(f"{padding}[erste]")
        await fake.wait_for(lambda: fake.bot_texts(dm) == ["echo: vorher", notice])
        await fake.send_dm(f"{padding}[zweite]")
        reads = len(fake.calls_to("GET /channels/*/messages"))
        await fake.wait_for(lambda: len(fake.calls_to("GET /channels/*/messages")) > reads + 2)
        assert fake.bot_texts(dm) == ["echo: vorher", notice]  # one notice per chat

        db.execute(f"PRAGMA max_page_count = {NO_LIMIT}")  # space is back
        await fake.wait_for(lambda: len(fake.bot_texts(dm)) == 4, within=20)
        await bot.engine.drain(5.0)
        assert fake.bot_texts(dm) == ["echo: vorher", notice, "echo: [erste]", "echo: [zweite]"]
    finally:
        await platform.stop_receiving()
        await bot.engine.drain(1.0)
        await platform.aclose()
