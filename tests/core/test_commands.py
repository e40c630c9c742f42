"""/new /forget /memory /help /status and access (behaviours 5 and 6)."""

from __future__ import annotations

import pytest

from chatbridge.core.commands import Command, parse_command
from tests.support.fakes import ManualClock, latest_noon
from tests.support.testbot import ALICE, TestBot, TestBots

EXPIRE = 31 * 60


def test_parse_command() -> None:
    assert parse_command("/new") == Command("new")
    assert parse_command("/Memory  bitte ") == Command("memory", "bitte")
    # Platform spellings (/start, /help@bot) are the Telegram adapter's job now:
    # core sees them unnormalised and must not pretend they are something else.
    assert parse_command("/start") == Command("start")
    assert parse_command("/new@chatbridge_bot") is None
    assert parse_command("/usr/bin/python ist kaputt") is None
    assert parse_command("kein /befehl") is None


async def test_new_starts_a_fresh_session_and_keeps_memory(bot: TestBot) -> None:
    await bot.say("Check wo das Chemitek-Paket bleibt")
    assert "Neue Session" in await bot.say("/new")
    await bot.say("Soll Mittwoch kommen")
    prompt = bot.provider.prompts[-1]
    assert len(prompt.messages) == 1
    assert "User: Check wo das Chemitek-Paket bleibt" in bot.last_prompt_text


async def test_forget_erases_the_ring_and_the_session(bot: TestBot) -> None:
    await bot.say("Check wo das Chemitek-Paket bleibt")
    assert "vergessen" in await bot.say("/forget")
    assert await bot.engine.store.ring(f"telegram:{ALICE}", since=0.0) == []
    await bot.say("Soll Mittwoch kommen")
    assert bot.last_prompt_text == "Soll Mittwoch kommen"
    assert len(bot.provider.prompts[-1].messages) == 1


async def test_memory_lists_what_this_chat_remembers(bot: TestBot) -> None:
    assert "nichts gemerkt" in await bot.say("/memory")
    await bot.say("Check wo das Chemitek-Paket bleibt")
    listing = await bot.say("/memory")
    assert "User: Check wo das Chemitek-Paket bleibt" in listing
    assert "Bot: echo: Check wo das Chemitek-Paket bleibt" in listing


async def test_help_lists_every_command(bot: TestBot) -> None:
    text = await bot.say("/help")
    for command in ("/new", "/forget", "/memory", "/status", "/help"):
        assert command in text


@pytest.fixture
async def noon_bot(testbot: TestBots) -> TestBot:
    """A bot whose clock starts at noon: "today" cannot end during the test."""
    return await testbot(clock=ManualClock(latest_noon()))


async def test_status_shows_model_session_ring_and_tokens(noon_bot: TestBot) -> None:
    bot = noon_bot
    assert "keine" in await bot.say("/status")
    await bot.say("eins")
    bot.clock.advance(600)
    status = await bot.say("/status")
    assert "scripted-model" in status
    assert "seit 10m" in status
    assert "20m" in status
    assert "Erinnerung: 1 Eintrag " in status
    assert "Tokens heute: 10 rein, 5 raus" in status
    await bot.say("zwei")
    assert "Erinnerung: 2 Einträge" in await bot.say("/status")


async def test_status_in_a_group_shows_no_token_counts(noon_bot: TestBot) -> None:
    bot = noon_bot
    from chatbridge.core.models import ChatKind

    await bot.say("privat", user=ALICE)  # Alice has used tokens today
    assert "Tokens heute: 10 rein, 5 raus" in await bot.say("/status", user=ALICE)
    status = await bot.say("/status", user=ALICE, chat="-100", kind=ChatKind.GROUP)
    assert "Tokens heute: – rein, – raus" in status
    assert "10 rein" not in status


async def test_commands_never_reach_the_provider(bot: TestBot) -> None:
    for command in ("/new", "/forget", "/memory", "/help", "/status", "/nonsense"):
        await bot.say(command)
    assert bot.provider.prompts == []
    assert "Unbekannter Befehl /nonsense" in bot.outboxes[-1].last


async def test_a_stranger_is_told_their_id_and_nothing_reaches_the_provider(bot: TestBot) -> None:
    reply = await bot.say("Hallo", user="999")
    assert "telegram:999" in reply
    assert "access.allow" in reply
    assert bot.provider.prompts == []
    assert await bot.engine.store.ring("telegram:999", since=0.0) == []


async def test_an_allowed_group_admits_its_members(bot: TestBot) -> None:
    from chatbridge.core.models import ChatKind

    reply = await bot.say("Hallo", user="999", chat="-100", kind=ChatKind.GROUP)
    assert reply.startswith("echo: Hallo")


async def test_the_console_is_always_allowed(bot: TestBot) -> None:
    reply = await bot.say("Hallo", platform="console", user="local", chat="local")
    assert reply == "echo: Hallo"
