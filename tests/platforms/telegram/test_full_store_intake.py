"""Issue 17.2: while the inbox cannot be written, the user hears one sentence,
the platform is not acknowledged, and `/readyz` says not ready.

The store is made full the way SQLite itself reports a full disk: `PRAGMA
max_page_count` on the store's own connection, so writes that need a new
page fail with SQLITE_FULL through the real code path; raising it again is
"space is back". (`tests/scenarios/test_full_disk_run.py` does the same on a
real full filesystem where the machine lets a test mount one.)
"""

from __future__ import annotations

import sqlite3

import pytest

from chatbridge.core.app.serve import _Readiness
from chatbridge.core.engine import EngineSettings
from chatbridge.core.ports.store import StoreError
from chatbridge.core.texts import say
from chatbridge.platforms.telegram import TelegramPlatform
from tests.platforms.telegram.conftest import telegram_config
from tests.stores.helpers import inbox_entry
from tests.support.fake_telegram import FakeTelegram
from tests.support.fakes import ScriptedProvider
from tests.support.testbot import ALICE, TestBot, TestBots

NO_LIMIT = 1_073_741_823  # SQLite's largest max_page_count


def _connection(bot: TestBot) -> sqlite3.Connection:
    """The store's own connection: max_page_count is per connection."""
    return bot.sqlite._conn()


def _fill(bot: TestBot) -> None:
    db = _connection(bot)
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")


@pytest.mark.parametrize("language", ["de", "en"])
async def test_a_refused_message_gets_one_notice_and_is_answered_once_space_is_back(
    fake: FakeTelegram, testbot: TestBots, language: str
) -> None:
    answer = ScriptedProvider("Das Paket kommt am Mittwoch.")
    bot = await testbot(provider=answer, settings=EngineSettings(language=language))
    platform = TelegramPlatform(
        config=telegram_config(fake), handler=bot.engine, say=bot.engine.settings.say
    )
    bot.engine.attach(platform.name, platform.outbox)
    notice = say(language, "inbox_full")
    try:
        await platform.start()
        _fill(bot)
        question = "Wo bleibt das Paket? " * 600  # needs new pages: the full store refuses it
        update = fake.push_text(int(ALICE), int(ALICE), question)
        polls = len(fake.calls_to("getUpdates"))
        # Not acknowledged: Telegram hands the same update out again and again.
        await fake.wait_for(lambda: len(fake.calls_to("getUpdates")) >= polls + 3, within=20)
        offsets = [c.params.get("offset") for c in fake.calls_to("getUpdates")[polls:]]
        assert all(o is None or int(o) <= update for o in offsets), offsets
        assert fake.bot_texts(int(ALICE)) == [notice]  # once, however often it came

        _connection(bot).execute(f"PRAGMA max_page_count = {NO_LIMIT}")  # space is back
        await fake.wait_for(lambda: len(fake.bot_texts(int(ALICE))) == 2, within=20)
        await bot.engine.drain(5.0)
        texts = fake.bot_texts(int(ALICE))
        assert texts == [notice, "Das Paket kommt am Mittwoch."]
        assert len(answer.prompts) == 1  # answered once
    finally:
        await platform.aclose()
        await bot.engine.drain(1.0)


class _Connected:
    """Our own `Platform` Protocol, as far as readiness looks at it."""

    name = "stand-in"
    connected = True


async def test_readyz_is_not_ready_while_the_store_refuses_writes(testbot: TestBots) -> None:
    bot = await testbot()
    readiness = _Readiness(bot.engine, probe_every=0.0)
    readiness.platforms.append(_Connected())  # type: ignore[arg-type]
    assert await readiness.ready() == (True, "ok")
    _fill(bot)
    for n in range(10_000):  # use up the free space inside the pages, too
        try:
            await bot.engine.store.inbox_add(inbox_entry(f"telegram:{n}", at=float(n)))
        except StoreError:
            break
    else:
        raise AssertionError("the store never filled")
    assert await readiness.ready() == (False, "store refuses writes")
    _connection(bot).execute(f"PRAGMA max_page_count = {NO_LIMIT}")
    assert await readiness.ready() == (True, "ok")
    pending = await bot.engine.store.inbox_pending()
    assert not [e for e in pending if e.message.conversation.platform == "chatbridge"]
