"""Session TTL boundaries, bridging on a new session, restarts (behaviours 1 and 3)."""

from __future__ import annotations

from dataclasses import replace

from chatbridge.core.engine import EngineSettings
from chatbridge.core.models import ChatKind
from tests.support.testbot import TestBot, TestBots

TTL = 30 * 60


async def test_idle_exactly_at_ttl_continues_the_session(bot: TestBot) -> None:
    await bot.say("Check wo das Chemitek-Paket bleibt")
    bot.clock.advance(TTL)
    await bot.say("Soll Mittwoch kommen")
    prompt = bot.provider.prompts[-1]
    assert "<conversation_history>" not in bot.last_prompt_text
    assert bot.last_prompt_text == "Soll Mittwoch kommen"
    assert [t.role for t in prompt.messages] == ["user", "assistant", "user"]
    assert prompt.messages[0].content == "Check wo das Chemitek-Paket bleibt"


async def test_just_past_ttl_opens_a_new_session_with_the_history_block(bot: TestBot) -> None:
    await bot.say("Check wo das Chemitek-Paket bleibt")
    bot.clock.advance(TTL + 0.001)
    await bot.say("Soll Mittwoch kommen")
    prompt = bot.provider.prompts[-1]
    assert len(prompt.messages) == 1, "a new session carries no old turns"
    text = bot.last_prompt_text
    assert text.startswith("<conversation_history>\nLetzte Gespräche mit dem User:\n")
    assert "User: Check wo das Chemitek-Paket bleibt" in text
    assert "Bot: echo: Check wo das Chemitek-Paket bleibt" in text
    assert text.endswith("Aktuelle Nachricht: Soll Mittwoch kommen")
    assert "Aktuelle Zeit: " in text


async def test_messages_inside_a_live_session_carry_no_block(bot: TestBot) -> None:
    await bot.say("eins")
    bot.clock.advance(TTL + 1)
    await bot.say("zwei")  # new session: block
    bot.clock.advance(60)
    await bot.say("drei")
    assert "<conversation_history>" in bot.provider.prompts[1].messages[-1].content
    assert bot.last_prompt_text == "drei"


async def test_the_first_message_ever_has_no_block(bot: TestBot) -> None:
    await bot.say("Hallo")
    assert bot.last_prompt_text == "Hallo"


async def test_old_turns_drop_out_of_the_live_session(testbot: TestBots) -> None:
    bot = await testbot(settings=replace(EngineSettings(), session_max_turns=4))
    for word in ("a", "b", "c", "d"):
        await bot.say(word)
    prompt = bot.provider.prompts[-1]
    contents = [t.content for t in prompt.messages]
    # The dropped exchange comes back in the block on the oldest kept turn.
    assert contents[1:] == ["echo: b", "c", "echo: c", "d"]
    assert "User: a\nBot: echo: a\n</conversation_history>" in contents[0]
    assert contents[0].endswith("Aktuelle Nachricht: b")


async def test_a_restart_inside_the_ttl_continues_the_session(testbot: TestBots) -> None:
    first = await testbot()
    await first.say("Check wo das Chemitek-Paket bleibt")
    await first.engine.store.aclose()

    second = await testbot()  # same database file, fresh engine
    second.clock.value = first.clock.value + 600
    await second.say("Soll Mittwoch kommen")
    prompt = second.provider.prompts[-1]
    assert [t.content for t in prompt.messages][:2] == [
        "Check wo das Chemitek-Paket bleibt",
        "echo: Check wo das Chemitek-Paket bleibt",
    ]


async def test_sessions_are_per_conversation(bot: TestBot) -> None:
    await bot.say("im DM")
    await bot.say("in der Gruppe", chat="-100", kind=ChatKind.GROUP)
    prompt = bot.provider.prompts[-1]
    assert [t.content for t in prompt.messages] == ["in der Gruppe"]
