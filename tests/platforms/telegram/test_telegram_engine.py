"""The Telegram adapter with the real engine: long streamed answers and flood control."""

from __future__ import annotations

import asyncio
import sys

import pytest
from telegramify_markdown import utf16_len

from chatbridge.core.models import MemoryEntry
from tests.platforms.telegram.conftest import Launch
from tests.support.fake_telegram import FakeTelegram
from tests.support.fakes import ScriptedProvider
from tests.support.testbot import ALICE, TestBot, TestBots

CODE_LINES = [f"value_{i:03d} = compute({i}, 'chemitek')" for i in range(260)]
LONG_ANSWER = (
    "Hier ist das Skript:\n\n```python\n"
    + "\n".join(CODE_LINES)
    + "\n```\n\n"
    + "Danach läuft alles. " * 40
)


def _in_chunks(text: str, size: int = 120) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def _ring_once_written(bot: TestBot) -> list[MemoryEntry]:
    """The ring entry is committed just after the last edit; wait for it."""
    deadline = asyncio.get_running_loop().time() + 30
    while asyncio.get_running_loop().time() < deadline:
        ring = await bot.engine.store.ring(f"telegram:{ALICE}", since=0.0)
        if ring:
            return ring
        await asyncio.sleep(0.025)
    raise AssertionError("no ring entry was written")


@pytest.fixture
async def bot(testbot: TestBots) -> TestBot:
    provider = ScriptedProvider(lambda prompt: _in_chunks(LONG_ANSWER))
    return await testbot(provider=provider)


async def test_a_10k_answer_arrives_split_with_code_intact(
    fake: FakeTelegram, launch: Launch, bot: TestBot
) -> None:
    assert len(LONG_ANSWER) > 10_000
    await launch(engine=bot.engine, edit_interval=0.05)
    fake.push_text(int(ALICE), int(ALICE), "Schreib mir das Skript")
    await fake.wait_for(lambda: any("Danach läuft alles." in t for t in fake.bot_texts(int(ALICE))))

    messages = [m for m in fake.messages(int(ALICE)) if m.sender["id"] == fake.me["id"]]
    assert len(messages) >= 3
    for message in messages:
        assert utf16_len(message.text) <= 4096
        assert "```" not in message.text, "code must be rendered as an entity, not raw fences"
    shown = "\n".join(m.text for m in messages)
    for line in CODE_LINES:
        assert shown.count(line) == 1, line
    for message in messages:
        pre = [e for e in message.entities if e["type"] == "pre"]
        code_here = [line for line in CODE_LINES if line in message.text]
        if code_here:
            assert pre, "a chunk holding code lost its code block"
            covered = "".join(
                message.text[e["offset"] : e["offset"] + e["length"]] for e in pre
            )  # ASCII text: UTF-16 offsets equal str offsets here
            assert all(line in covered for line in code_here)
    ring = await _ring_once_written(bot)
    assert len(ring) == 1
    assert ring[0].assistant_summary.startswith("Hier ist das Skript:")


async def test_flood_control_while_streaming_still_delivers_everything(
    fake: FakeTelegram, launch: Launch, testbot: TestBots
) -> None:
    provider = ScriptedProvider(lambda prompt: _in_chunks(LONG_ANSWER), chunk_delay=0.01)
    slow_bot = await testbot(provider=provider)
    await launch(engine=slow_bot.engine, edit_interval=0.05, drafts=False)  # the edit path
    fake.fail_next("editMessageText", count=2, retry_after=1)
    fake.push_text(int(ALICE), int(ALICE), "Schreib mir das Skript")
    await fake.wait_for(
        lambda: any("Danach läuft alles." in t for t in fake.bot_texts(int(ALICE))), within=20
    )
    assert fake.failures_left("editMessageText") == 0, "flood control was never hit"
    assert len(fake.calls_to("editMessageText")) > 2, "the answer was not streamed"
    shown = "\n".join(fake.bot_texts(int(ALICE)))
    assert all(shown.count(line) == 1 for line in CODE_LINES)
    await _ring_once_written(slow_bot)


async def test_group_without_mention_never_reaches_the_engine(
    fake: FakeTelegram, launch: Launch, bot: TestBot
) -> None:
    await launch(engine=bot.engine)
    fake.push_text(-100, int(ALICE), "Nur unter uns", chat_type="supergroup")
    fake.push_text(-100, int(ALICE), "@bridge_bot Hallo", chat_type="supergroup")
    await fake.wait_for(lambda: bool(fake.bot_texts(-100)), within=10)
    assert [p.messages[-1].content for p in bot.provider.prompts] == ["Hallo"]
    ring = await _ring_once_written(bot)
    assert [e.scope for e in ring] == ["telegram:-100"]


_STREAM_WITH_NO_INTERVAL = """
import asyncio
import sys
from chatbridge.config import TelegramConfig
from chatbridge.core.delivery import StreamingReply
from chatbridge.platforms.telegram import TelegramOutbox
from telegram import Bot

config = TelegramConfig.model_validate({"edit_interval": 0})  # a valid setting

class Chat:
    limits = TelegramOutbox(Bot("1:x"), 1, edit_interval=config.edit_interval).limits
    async def send(self, text): return "1:1"
    async def edit(self, ref, text): pass
    async def typing(self): pass

async def main():
    reply = StreamingReply(Chat())
    await reply.push("a")
    await asyncio.sleep(0.05)  # the model pauses between two chunks
    await reply.push("b")
    await reply.finish()

asyncio.run(main())
"""


async def test_streaming_with_no_edit_interval_does_not_starve_the_event_loop() -> None:
    # In a child process: the bug this guards against (a progress loop that
    # never yields with edit_interval 0) blocked the event loop it ran on.
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", _STREAM_WITH_NO_INTERVAL)
    try:  # a hang detector, not a speed check: the child needs ~1 s of imports
        code = await asyncio.wait_for(process.wait(), 30)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise TimeoutError("a streamed reply with edit_interval 0 never finished") from None
    assert code == 0
