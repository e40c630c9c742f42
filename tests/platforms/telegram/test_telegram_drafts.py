"""Telegram drafts through the real engine and PTB: private chats stream with
sendMessageDraft and then get one sendMessage per 4,096 chars, never an edit;
groups keep edits; a Bot API that refuses drafts falls back to edits."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from telegramify_markdown import utf16_len

from tests.platforms.telegram.conftest import Launch
from tests.support.fake_telegram import FakeTelegram
from tests.support.fakes import ScriptedProvider
from tests.support.testbot import ALICE, TestBot, TestBots

ANSWER = " ".join(f"Schritt{i}" for i in range(80)) + "."
LONG = "\n\n".join(f"Absatz {i}: " + "Die Sendung ist unterwegs. " * 12 for i in range(40))
GROUP = -100
DRAFT_LOG = "chatbridge.platforms.telegram._drafts"


def _pieces(text: str, size: int = 12) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.fixture
async def bot(testbot: TestBots) -> AsyncIterator[TestBot]:
    # Slow enough that an answer spans several edit intervals.
    provider = ScriptedProvider(lambda prompt: _pieces(ANSWER), chunk_delay=0.01)
    bot = await testbot(provider=provider)
    yield bot
    await bot.engine.drain(2.0)


async def _remembered(bot: TestBot, count: int, user: str = ALICE) -> None:
    """Until `count` answers to `user` are committed (each after its last call)."""
    for _ in range(500):
        if len(await bot.engine.store.ring(f"telegram:{user}", since=0.0)) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{count} answers were not remembered")


def _methods(fake: FakeTelegram, chat: int) -> list[str]:
    """The bot's message calls into `chat`, in order."""
    wanted = {"sendMessage", "sendMessageDraft", "editMessageText"}
    return [c.method for c in fake.calls if c.method in wanted and c.params["chat_id"] == chat]


async def test_a_private_answer_streams_as_drafts_then_one_message(
    fake: FakeTelegram, launch: Launch, bot: TestBot
) -> None:
    await launch(engine=bot.engine, edit_interval=0.05)
    fake.push_text(int(ALICE), int(ALICE), "Wie geht es weiter?")
    await _remembered(bot, 1)
    assert fake.bot_texts(int(ALICE)) == [ANSWER]

    methods = _methods(fake, int(ALICE))
    assert methods.count("sendMessageDraft") >= 2, methods
    assert methods.count("sendMessage") == 1
    assert "editMessageText" not in methods
    assert methods[-1] == "sendMessage", "the final text comes after every draft"
    drafts = fake.drafts[int(ALICE)]
    assert len({draft_id for draft_id, _ in drafts}) == 1, "one draft_id per reply"
    assert all(draft_id != 0 for draft_id, _ in drafts)
    texts = [text for _, text in drafts]
    assert all(ANSWER.startswith(t) for t in texts), "a draft shows the answer so far"
    assert texts == sorted(texts, key=len), "drafts only grow"
    assert fake.calls_to("sendChatAction"), "typing shows until the first draft"


async def test_a_long_private_answer_is_sent_split_and_never_edited(
    fake: FakeTelegram, launch: Launch, testbot: TestBots
) -> None:
    provider = ScriptedProvider(lambda prompt: _pieces(LONG, 200), chunk_delay=0.005)
    bot = await testbot(provider=provider)
    await launch(engine=bot.engine, edit_interval=0.05)
    fake.push_text(int(ALICE), int(ALICE), "Erzähl alles")
    await fake.wait_for(lambda: "Absatz 39" in "".join(fake.bot_texts(int(ALICE))), within=15)
    await bot.engine.drain(2.0)

    methods = _methods(fake, int(ALICE))
    assert "editMessageText" not in methods
    sent = fake.bot_texts(int(ALICE))
    assert len(sent) == methods.count("sendMessage") >= 3
    assert all(utf16_len(text) <= 4096 for text in sent)
    shown = " ".join(" ".join(sent).split())
    for i in range(40):
        assert shown.count(f"Absatz {i}:") == 1
    drafts = [text for _, text in fake.drafts[int(ALICE)]]
    assert len(drafts) >= 2
    assert all(utf16_len(text) <= 4096 for text in drafts)
    # Past the first 4,096 chars the draft shows the part being written.
    assert any(text.startswith("Absatz 1") and "Absatz 0:" not in text for text in drafts)


async def test_a_group_answer_streams_by_edits(
    fake: FakeTelegram, launch: Launch, bot: TestBot
) -> None:
    await launch(engine=bot.engine, edit_interval=0.05)
    fake.push_text(GROUP, int(ALICE), "@bridge_bot Wie geht es weiter?", chat_type="supergroup")
    await fake.wait_for(lambda: fake.bot_texts(GROUP) == [ANSWER], within=10)
    await bot.engine.drain(2.0)  # the test ends here: draining is what stops the engine
    methods = _methods(fake, GROUP)
    assert "sendMessageDraft" not in methods
    assert methods.count("sendMessage") == 1
    assert methods.count("editMessageText") >= 1


async def test_drafts_false_streams_private_answers_by_edits(
    fake: FakeTelegram, launch: Launch, bot: TestBot
) -> None:
    await launch(engine=bot.engine, edit_interval=0.05, drafts=False)
    fake.push_text(int(ALICE), int(ALICE), "Wie geht es weiter?")
    await _remembered(bot, 1)
    assert fake.bot_texts(int(ALICE)) == [ANSWER]
    methods = _methods(fake, int(ALICE))
    assert "sendMessageDraft" not in methods
    assert methods.count("editMessageText") >= 1


async def test_a_quick_answer_is_one_message_without_a_draft(
    fake: FakeTelegram, launch: Launch, testbot: TestBots
) -> None:
    bot = await testbot(provider=ScriptedProvider("Gleich da."))
    await launch(engine=bot.engine, edit_interval=5.0)
    fake.push_text(int(ALICE), int(ALICE), "Hallo")
    await fake.wait_for(lambda: fake.bot_texts(int(ALICE)) == ["Gleich da."], within=10)
    await bot.engine.drain(2.0)
    assert _methods(fake, int(ALICE)) == ["sendMessage"]


async def test_refused_drafts_fall_back_to_edits_for_that_chat_logged_once(
    fake: FakeTelegram, launch: Launch, bot: TestBot, caplog: pytest.LogCaptureFixture
) -> None:
    fake.refuse_drafts()
    await launch(engine=bot.engine, edit_interval=0.05)
    with caplog.at_level(logging.WARNING, logger=DRAFT_LOG):
        fake.push_text(int(ALICE), int(ALICE), "Erste Frage")
        await _remembered(bot, 1)
        first = _methods(fake, int(ALICE))
        fake.push_text(int(ALICE), int(ALICE), "Zweite Frage")
        await _remembered(bot, 2)
    second = _methods(fake, int(ALICE))[len(first) :]
    # The refused draft is the first call; the answer then streams by edits, whole.
    assert first[0] == "sendMessageDraft"
    assert first.count("sendMessageDraft") == 1
    assert first.count("editMessageText") >= 1
    assert "sendMessageDraft" not in second, "that chat no longer tries drafts"
    assert second.count("editMessageText") >= 1
    refusals = [r for r in caplog.records if "drafts refused" in r.getMessage()]
    assert len(refusals) == 1
    assert str(ALICE) in refusals[0].getMessage()


async def test_a_server_without_drafts_turns_them_off_for_every_chat(
    fake: FakeTelegram, launch: Launch, bot: TestBot, caplog: pytest.LogCaptureFixture
) -> None:
    fake.forget_method("sendMessageDraft")  # an older self-hosted Bot API server: 404
    await launch(engine=bot.engine, edit_interval=0.05)
    with caplog.at_level(logging.WARNING, logger=DRAFT_LOG):
        fake.push_text(int(ALICE), int(ALICE), "Erste Frage")
        await _remembered(bot, 1)
        fake.push_text(42, 42, "Andere Person")
        await _remembered(bot, 1, user="42")
    assert _methods(fake, int(ALICE)).count("sendMessageDraft") == 1
    assert "sendMessageDraft" not in _methods(fake, 42)
    assert _methods(fake, 42).count("editMessageText") >= 1
    notes = [r for r in caplog.records if "sendMessageDraft" in r.getMessage()]
    assert len(notes) == 1
    assert fake.token not in caplog.text
