"""Long polling against the fake Bot API: offsets, restarts, commands, concurrency."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from chatbridge.core.models import ChatKind, IncomingMessage
from chatbridge.core.ports import PlatformStartFailed
from chatbridge.platforms.base import Outbox
from chatbridge.platforms.telegram import TelegramPlatform
from tests.platforms.telegram.conftest import Launch, StandInEngine, telegram_config
from tests.support.closing import Closing
from tests.support.fake_telegram import FakeTelegram
from tests.support.testbot import ALICE, TestBots


async def test_private_message_reaches_engine_and_echo_is_sent(
    fake: FakeTelegram, engine: StandInEngine, launch: Launch
) -> None:
    await launch()
    update_id = fake.push_text(100, 100, "hello there")
    await fake.wait_for(lambda: fake.bot_texts(100) == ["echo: hello there"])

    [message] = engine.handled
    assert message.text == "hello there"
    # The bare update_id: the engine's inbox keys it by platform itself.
    assert message.event_id == str(update_id)
    conv = message.conversation
    assert (conv.platform, conv.chat, conv.user, conv.thread) == ("telegram", "100", "100", "")
    assert conv.kind is ChatKind.PRIVATE


async def test_start_registers_engine_commands_and_deletes_webhook(
    fake: FakeTelegram, launch: Launch
) -> None:
    await launch()
    # The command menu is registered beside receiving, not before it.
    await fake.wait_for(lambda: bool(fake.commands))
    assert fake.commands == [
        {"command": "help", "description": "Show help"},
        {"command": "new", "description": "Fresh session"},
    ]
    # What Telegram sees: who am I, no webhook, then long polls for messages only.
    await fake.wait_for(lambda: bool(fake.calls_to("getUpdates")))
    methods = [c.method for c in fake.calls]
    assert methods[0] == "getMe"
    assert methods.index("deleteWebhook") < methods.index("getUpdates")
    first_poll = fake.calls_to("getUpdates")[0].params
    assert first_poll["allowed_updates"] == ["message"]
    assert first_poll["timeout"] > 0  # a long poll, not a busy loop


async def test_typing_action_is_sent_to_the_chat(fake: FakeTelegram, launch: Launch) -> None:
    await launch()
    fake.push_text(100, 100, "hi")
    await fake.wait_for(lambda: bool(fake.bot_texts(100)))
    [action] = fake.calls_to("sendChatAction")
    assert action.params == {"chat_id": 100, "action": "typing"}


async def test_every_update_is_handled_once_across_a_restart(
    fake: FakeTelegram, closing: Closing
) -> None:
    engine = StandInEngine()
    first = closing(_platform(fake, engine))
    await first.start()
    ids = [fake.push_text(100, 100, f"m{i}") for i in range(3)]
    await fake.wait_for(lambda: len(engine.handled) == 3)
    await first.aclose()

    # Arrive while the bot is down: nothing may be skipped.
    ids += [fake.push_text(200, 200, f"m{i}") for i in range(3, 5)]
    second = _platform(fake, engine)
    await second.start()
    try:
        await fake.wait_for(lambda: len(engine.handled) == 5)
        # A poll asked after the last update was taken: a re-delivery would come with it.
        polls = len(fake.calls_to("getUpdates"))
        await fake.wait_for(lambda: len(fake.calls_to("getUpdates")) >= polls + 2, within=30)
    finally:
        await second.aclose()
    assert [m.event_id for m in engine.handled] == [str(i) for i in ids]
    assert sorted(fake.served) == ids  # Telegram handed each update out exactly once


async def test_updates_fetched_before_stop_are_answered_not_redelivered(
    fake: FakeTelegram, closing: Closing
) -> None:
    release = asyncio.Event()

    async def slow(message: IncomingMessage, outbox: Outbox) -> None:
        await release.wait()
        await outbox.send(f"done {message.text}")

    engine = StandInEngine(slow)
    platform = closing(_platform(fake, engine))
    await platform.start()
    ids = [fake.push_text(100, 100, f"q{i}") for i in range(3)]
    await fake.wait_for(lambda: len(engine.handled) == 3)
    # Shutdown as `chatbridge run` does it: stop receiving, drain, close.
    await platform.stop_receiving()
    assert not platform.connected
    assert fake.bot_texts(100) == []  # the answers are still in flight...
    release.set()
    await engine.drain()
    assert fake.bot_texts(100) == ["done q0", "done q1", "done q2"]  # ...and still go out
    await platform.aclose()
    # stop_receiving confirmed every accepted update to Telegram.
    confirm = fake.calls_to("getUpdates")[-1].params
    assert (confirm["offset"], confirm["timeout"]) == (ids[-1] + 1, 0)

    again = closing(_platform(fake, engine))
    await again.start()
    # Its first poll is answered and a second one asked: whatever Telegram
    # still had for it would have come with the first.
    polls = len(fake.calls_to("getUpdates"))
    await fake.wait_for(lambda: len(fake.calls_to("getUpdates")) >= polls + 2, within=30)
    await again.aclose()
    assert len(engine.handled) == 3


async def test_different_chats_are_answered_concurrently(
    fake: FakeTelegram, launch: Launch
) -> None:
    other_chat_seen = asyncio.Event()

    async def reply(message: IncomingMessage, outbox: Outbox) -> None:
        if message.conversation.chat == "100":
            # Blocks until chat 200 is handled: only possible if handled in parallel.
            await asyncio.wait_for(other_chat_seen.wait(), 5)
        else:
            other_chat_seen.set()
        await outbox.send("ok")

    await launch(engine=StandInEngine(reply))
    fake.push_text(100, 100, "first")
    fake.push_text(200, 200, "second")
    await fake.wait_for(lambda: fake.bot_texts(100) == ["ok"] and fake.bot_texts(200) == ["ok"])


async def test_rejected_token_fails_start_without_leaking_it(fake: FakeTelegram) -> None:
    from pydantic import SecretStr

    cfg = telegram_config(fake, token=SecretStr("999:WRONG-secret-token"))
    platform = TelegramPlatform(config=cfg, handler=StandInEngine())
    with pytest.raises(PlatformStartFailed, match="rejected the bot token") as info:
        await platform.start()
    await platform.aclose()  # harmless after a failed start
    assert "WRONG-secret-token" not in str(info.value)


def _platform(fake: FakeTelegram, engine: StandInEngine) -> TelegramPlatform:
    platform = TelegramPlatform(
        config=telegram_config(fake), handler=engine, commands=engine.commands
    )
    engine.attach(platform.name, platform.outbox)
    return platform


async def test_an_update_the_inbox_could_not_take_is_not_acknowledged(
    fake: FakeTelegram, launch: Launch, tmp_path: Path, testbot: TestBots
) -> None:
    """The real engine on SQLite whose inbox refuses writes (as a full disk
    would): the offset stays on the update, Telegram serves it again, and
    once the store works it is answered, once."""
    bot = await testbot()
    _sql(tmp_path / "bot.db", "CREATE TRIGGER inbox_full BEFORE INSERT ON inbox "
         "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")  # fmt: skip
    await launch(engine=bot.engine)
    update_id = fake.push_text(int(ALICE), int(ALICE), "keep me")
    await fake.wait_for(lambda: fake.served.count(update_id) >= 2, within=30)
    offsets = [c.params.get("offset") for c in fake.calls_to("getUpdates")]
    assert update_id + 1 not in offsets, "the offset moved past an update not stored"
    assert fake.bot_texts(int(ALICE)) == []
    assert bot.provider.prompts == []

    _sql(tmp_path / "bot.db", "DROP TRIGGER inbox_full")
    await fake.wait_for(lambda: fake.bot_texts(int(ALICE)) == ["echo: keep me"], within=30)
    # Acknowledged now; a poll after that shows nothing came twice.
    await fake.wait_for(
        lambda: any(c.params.get("offset") == update_id + 1 for c in fake.calls_to("getUpdates")),
        within=30,
    )
    await bot.engine.drain(5.0)  # every answer in flight is out
    assert fake.bot_texts(int(ALICE)) == ["echo: keep me"]
    assert len(bot.provider.prompts) == 1


def _sql(path: Path, statement: str) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute(statement)
    finally:
        db.close()
