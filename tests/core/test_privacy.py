"""A ring entry only ever reaches an audience that saw it (behaviour 4)."""

from __future__ import annotations

from chatbridge.core.models import ChatKind
from tests.support.testbot import ALICE, TestBot, TestBots

EXPIRE = 31 * 60
BOB = "42"


async def test_user_b_never_sees_user_a_ring(bot: TestBot) -> None:
    await bot.say("Alices Geheimnis: PIN 4711")
    bot.clock.advance(EXPIRE)
    await bot.say("Hallo", user=BOB)
    assert "4711" not in bot.last_prompt_text
    assert bot.last_prompt_text == "Hallo"
    assert "4711" not in await bot.say("/memory", user=BOB)
    bot.clock.advance(EXPIRE)
    await bot.say("Und ich?")  # control: Alice herself does get her entry back
    assert "User: Alices Geheimnis: PIN 4711" in bot.last_prompt_text


async def test_a_private_entry_never_reaches_a_group(bot: TestBot) -> None:
    await bot.say("Meine Diagnose ist vertraulich")
    bot.clock.advance(EXPIRE)
    await bot.say("Hallo Gruppe", chat="-100", kind=ChatKind.GROUP)
    assert "vertraulich" not in bot.last_prompt_text
    assert "vertraulich" not in await bot.say("/memory", chat="-100", kind=ChatKind.GROUP)
    bot.clock.advance(EXPIRE)
    await bot.say("Und privat?")  # control: the same entry does reach the private chat
    assert "User: Meine Diagnose ist vertraulich" in bot.last_prompt_text


async def test_a_group_entry_reaches_only_that_group(bot: TestBot) -> None:
    await bot.say("Sprint-Planung Gruppe A", chat="-100", kind=ChatKind.GROUP)
    bot.clock.advance(EXPIRE)
    await bot.say("Hallo B", chat="-200", kind=ChatKind.GROUP)
    assert "Sprint-Planung" not in bot.last_prompt_text
    await bot.say("Hallo privat")
    assert "Sprint-Planung" not in bot.last_prompt_text
    await bot.say("Wie war das?", chat="-100", kind=ChatKind.GROUP)
    assert "User: Sprint-Planung Gruppe A" in bot.last_prompt_text


async def test_one_identity_shares_one_ring_across_platforms(testbot: TestBots) -> None:
    bot = await testbot(
        allow=("alice",),
        identities={"alice": [f"telegram:{ALICE}", "slack:U0123"]},
    )
    await bot.say("Check wo das Chemitek-Paket bleibt")
    bot.clock.advance(60)
    await bot.say("Soll Mittwoch kommen", platform="slack", user="U0123", chat="D1")
    assert "User: Check wo das Chemitek-Paket bleibt" in bot.last_prompt_text
    assert await bot.engine.store.ring(f"telegram:{ALICE}", since=0.0) == []
    assert len(await bot.engine.store.ring("alice", since=0.0)) == 2
