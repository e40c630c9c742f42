"""The seed's own platform end to end: `chatbridge run` with Telegram + OpenAI fakes.

A user asks about the parcel in a private chat, the session expires, and
"Soll Mittwoch kommen" is still understood. Real python-telegram-bot, real
openai SDK, real SQLite, the real CLI in a child process.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.chemitek import FIRST, SECOND, TRACKING, UNDERSTOOD, chemitek_model
from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.people import ALICE
from tests.support.run_config import write_run_config
from tests.support.sse import Reply
from tests.support.story_run import remembered, stopped

STRANGER = 111


def _config(home: Path, telegram: FakeTelegram, openai: FakeOpenAI, port: int) -> None:
    write_run_config(
        home,
        port=port,
        telegram=telegram.base_url,
        openai=openai.base_url,
        engine={"session_ttl": "1s"},
        providers={"main": {"api_key": "${OPENAI_API_KEY}"}},
        platforms={"telegram": {"edit_interval": "0.2s"}},
    )


async def test_chemitek_story_through_chatbridge_run(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram, FakeOpenAI(chunk_chars=12) as openai:
        openai.script(Reply(text=chemitek_model), Reply(text=chemitek_model))
        _config(tmp_path, telegram, openai, free_port())
        env = clean_env({"TELEGRAM_BOT_TOKEN": telegram.token, "OPENAI_API_KEY": "sk-e2e-9876"})
        process = await asyncio.create_subprocess_exec(
            *CHATBRIDGE, "run", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            telegram.push_text(STRANGER, STRANGER, "Hallo?")
            await telegram.wait_for(lambda: bool(telegram.bot_texts(STRANGER)), within=30)

            telegram.push_text(ALICE, ALICE, FIRST)
            await telegram.wait_for(
                lambda: any("09.04." in t for t in telegram.bot_texts(ALICE)), within=20
            )
            await asyncio.sleep(1.5)  # the 1 s session expires
            telegram.push_text(ALICE, ALICE, SECOND)
            await telegram.wait_for(
                lambda: any(UNDERSTOOD in t for t in telegram.bot_texts(ALICE)), within=20
            )
            # An admin looks at the memory while the bot keeps serving.
            memory = await remembered(tmp_path, env, f"telegram:{ALICE}", telegram.wait_for)
        finally:
            ran = await stopped(process)

    ran.assert_clean(telegram.token, "sk-e2e-9876")
    assert memory == [FIRST, SECOND]
    denial = telegram.bot_texts(STRANGER)
    assert len(denial) == 1
    assert f"telegram:{STRANGER}" in denial[0]
    assert "access.allow" in denial[0]
    assert len(openai.requests) == 2, "the stranger's message never reached the provider"
    transcript = telegram.bot_texts(ALICE)
    assert transcript[0] == TRACKING
    assert transcript[1] == UNDERSTOOD
    bridged = openai.requests[1].body["messages"][-1]["content"]
    assert bridged.startswith("<conversation_history>")
    assert f"User: {FIRST}" in bridged
    assert bridged.endswith(f"Aktuelle Nachricht: {SECOND}")
    assert telegram.calls_to("setMyCommands")
    assert telegram.calls_to("sendChatAction")
