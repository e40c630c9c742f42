"""Where the bot answers: DMs, mentions, replies, threads; what it ignores."""

from __future__ import annotations

import asyncio

from chatbridge.core.models import ChatKind
from tests.platforms.discord.conftest import Launch
from tests.support.fake_discord import BOT_ID, CHANNEL_ID, THREAD_ID, USER_ID, FakeDiscord
from tests.support.fakes import ScriptedProvider

OTHER_BOT = 1000000000000000099


async def test_dm_is_answered_with_typing_and_remembered(fake: FakeDiscord, launch: Launch) -> None:
    thinking = asyncio.Event()
    provider = ScriptedProvider(lambda p: [f"echo: {p.messages[-1].content}"], gate=thinking)
    running = await launch(provider=provider)
    await fake.send_dm("Hallo Bot")
    dm = fake.dm_channel()
    await fake.wait_for(lambda: dm in fake.typing)  # typing while the model thinks
    thinking.set()
    await fake.wait_for(lambda: fake.bot_texts(dm) == ["echo: Hallo Bot"])
    ring = await running.ring()
    assert ring[0].user_message == "Hallo Bot"
    assert ring[0].scope == ChatKind.PRIVATE.value


async def test_mention_is_answered_as_a_reply_and_the_mention_is_stripped(
    fake: FakeDiscord, launch: Launch
) -> None:
    running = await launch()
    question = await fake.send_guild_message("wie spät ist es?", mention_bot=True)
    await fake.wait_for(lambda: bool(fake.bot_texts(CHANNEL_ID)))
    answer = fake.bot_messages(CHANNEL_ID)[0]
    assert answer.content == "echo: wie spät ist es?"
    assert answer.reference == int(question["id"])
    assert running.prompts == ["wie spät ist es?"]
    assert (await running.ring())[0].scope == f"discord:{CHANNEL_ID}"


async def test_channel_chatter_is_ignored_but_a_reply_to_the_bot_is_answered(
    fake: FakeDiscord, launch: Launch
) -> None:
    running = await launch()
    await fake.send_guild_message("nur unter uns")
    await fake.send_guild_message("erste Frage", mention_bot=True)
    await fake.wait_for(lambda: len(fake.bot_texts(CHANNEL_ID)) == 1)
    await fake.send_reply_to_bot("und weiter?")
    await fake.wait_for(lambda: len(fake.bot_texts(CHANNEL_ID)) == 2)
    assert running.prompts == ["erste Frage", "und weiter?"]


async def test_bots_and_edits_are_ignored(fake: FakeDiscord, launch: Launch) -> None:
    running = await launch()
    await fake.send_dm("von einem Bot", author=OTHER_BOT)
    fake.channels[fake.dm_channel(OTHER_BOT)]["recipients"][0]["bot"] = True
    bot_msg = fake.user_message(CHANNEL_ID, "ich bin ein bot", author=OTHER_BOT, mention_bot=True)
    bot_msg["author"]["bot"] = True
    await fake.dispatch("MESSAGE_CREATE", bot_msg)
    edited = fake.user_message(CHANNEL_ID, "bearbeitet", mention_bot=True)
    await fake.dispatch("MESSAGE_UPDATE", edited)
    await fake.send_dm("Menschenfrage")
    await fake.wait_for(lambda: bool(fake.bot_texts(fake.dm_channel())))
    await running.settled()
    await running.bot.engine.drain(5.0)  # an answer to anything else would be out now
    assert running.prompts == ["Menschenfrage"]
    assert fake.bot_texts(CHANNEL_ID) == []


async def test_a_thread_is_its_own_conversation_and_needs_no_mention_after_an_answer(
    fake: FakeDiscord, launch: Launch
) -> None:
    running = await launch()
    await fake.send_thread_message("ohne Erwähnung, noch nie beantwortet")
    await fake.send_guild_message("Frage im Thread", channel_id=THREAD_ID, mention_bot=True)
    await fake.wait_for(lambda: len(fake.bot_texts(THREAD_ID)) == 1)
    await fake.send_thread_message("Folgefrage ohne Erwähnung")
    await fake.wait_for(lambda: len(fake.bot_texts(THREAD_ID)) == 2)
    assert running.prompts == ["Frage im Thread", "Folgefrage ohne Erwähnung"]
    assert fake.bot_texts(CHANNEL_ID) == []
    # The answer's commit follows its delivery: wait for it, not for the text.
    await running.ring(count=2)
    assert await running.bot.engine.store.inbox_pending() == []
    # The thread's session is keyed by the thread, not the parent channel.
    prompt = running.bot.provider.prompts[1]
    assert [m.content for m in prompt.messages if m.role == "user"][-2:] == [
        "Frage im Thread",
        "Folgefrage ohne Erwähnung",
    ]


async def test_thread_per_mention_answers_in_a_new_thread_that_continues(
    fake: FakeDiscord, launch: Launch
) -> None:
    running = await launch(thread_per_mention=True)
    question = await fake.send_guild_message("Lange Diskussion bitte", mention_bot=True)
    thread_id = int(question["id"])
    await fake.wait_for(lambda: bool(fake.bot_texts(thread_id)))
    assert fake.channels[thread_id]["type"] == 11
    assert fake.bot_texts(thread_id) == ["echo: Lange Diskussion bitte"]
    assert fake.bot_texts(CHANNEL_ID) == []
    await fake.send_thread_message("weiter im Thread", thread_id=thread_id)
    await fake.wait_for(lambda: len(fake.bot_texts(thread_id)) == 2)
    assert running.prompts[-1] == "weiter im Thread"
    prompt = running.bot.provider.prompts[1]
    assert "Lange Diskussion bitte" in [m.content for m in prompt.messages]


async def test_stranger_gets_the_access_reply_naming_their_id(
    fake: FakeDiscord, launch: Launch
) -> None:
    running = await launch()
    stranger = 1000000000000000077
    await fake.send_dm("Hallo?", author=stranger)
    dm = fake.dm_channel(stranger)
    await fake.wait_for(lambda: bool(fake.bot_texts(dm)))
    assert f"discord:{stranger}" in fake.bot_texts(dm)[0]
    assert "access.allow" in fake.bot_texts(dm)[0]
    assert running.prompts == []
    assert BOT_ID != USER_ID
