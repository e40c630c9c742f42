"""Ring limits and what an exchange leaves behind (behaviour 2)."""

from __future__ import annotations

from dataclasses import replace

from chatbridge.core.engine import EngineSettings
from tests.support.fakes import ScriptedProvider
from tests.support.testbot import ALICE, TestBot, TestBots

HOUR = 3600.0


async def _ring(bot: TestBot, user: str = f"telegram:{ALICE}") -> list:
    return await bot.engine.store.ring(user, since=0.0)


async def test_ring_keeps_at_most_max_entries(bot: TestBot) -> None:
    for i in range(25):
        await bot.say(f"Nachricht {i}")
    ring = await _ring(bot)
    assert [e.user_message for e in ring] == [f"Nachricht {i}" for i in range(5, 25)]


async def test_entries_older_than_max_age_never_come_back(bot: TestBot) -> None:
    await bot.say("Chemitek-Paket von vorgestern")
    bot.clock.advance(24 * HOUR + 1)
    await bot.say("Was war mit dem Paket?")
    assert bot.last_prompt_text == "Was war mit dem Paket?", "stale context leaked back"


async def test_entries_just_inside_max_age_are_injected(bot: TestBot) -> None:
    await bot.say("Chemitek-Paket")
    bot.clock.advance(24 * HOUR - 1)
    await bot.say("Soll Mittwoch kommen")
    assert "User: Chemitek-Paket" in bot.last_prompt_text


async def test_only_the_last_inject_entries_are_injected(testbot: TestBots) -> None:
    bot = await testbot(provider=ScriptedProvider("notiert"))
    for i in range(8):
        await bot.say(f"Thema {i}")
        bot.clock.advance(31 * 60)
    text = bot.last_prompt_text
    assert text.count("\nUser: ") == 5
    assert "User: Thema 2\n" in text
    assert "User: Thema 1\n" not in text


async def test_entry_cuts_user_message_and_summary(testbot: TestBots) -> None:
    long_line = "Die Sendung 1Z999AA10123456784 ist unterwegs " * 20
    provider = ScriptedProvider(lambda prompt: [long_line, "\nzweite Zeile"])
    bot = await testbot(provider=provider)
    await bot.say("frage " * 200)
    (entry,) = await _ring(bot)
    assert len(entry.user_message) <= 500
    assert entry.user_message.endswith("…")
    assert 0 < len(entry.assistant_summary) <= 300
    assert entry.assistant_summary.startswith("Die Sendung 1Z999AA10123456784")
    assert entry.scope == "private"


async def test_summary_and_user_limits_follow_settings(testbot: TestBots) -> None:
    settings = replace(EngineSettings(), user_chars=20, summary_chars=30)
    bot = await testbot(settings=settings)
    await bot.say("eine ziemlich lange Nachricht an den Bot")
    (entry,) = await _ring(bot)
    assert len(entry.user_message) <= 20
    assert len(entry.assistant_summary) <= 30


async def test_usage_is_counted_per_user_and_day(bot: TestBot) -> None:
    await bot.say("eins")
    await bot.say("zwei")
    day = bot.engine.settings.today(bot.clock.now())
    usage = await bot.engine.store.usage(f"telegram:{ALICE}", day=day)
    assert (usage.input_tokens, usage.output_tokens) == (20, 10)
