"""The seed's story begun by voice, and a photo that outlives a SIGKILL.

Telegram through `chatbridge run` with the fake Bot API and the fake OpenAI
(chat and transcription): what the voice message said is remembered like a
typed message, so after the session gap "Soll Mittwoch kommen" is bridged with
it; a photo received before a kill is answered after the restart, from the
file reference the inbox kept (never the bytes).
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.support import inbox_file
from tests.support.chemitek import FIRST, SECOND, TRACKING, UNDERSTOOD, chemitek_model
from tests.support.cli import free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.media import OGG, b64, openai_images, png, running
from tests.support.people import ALICE
from tests.support.run_config import run_config_text
from tests.support.sse import Reply

pytestmark = pytest.mark.timeout(120)


def _config(telegram: FakeTelegram, openai: FakeOpenAI) -> str:
    return run_config_text(
        port=free_port(),
        telegram=telegram.base_url,
        openai=openai.base_url,
        engine={"session_ttl": "1s"},
        providers={"main": {"api_key": "sk-voice-1234"}},
        platforms={"telegram": {"drafts": False, "edit_interval": "0.2s"}},
        media={"transcription": {"provider": "main", "model": "whisper-1"}},
    )


async def test_a_spoken_question_is_bridged_after_the_session_gap(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram, FakeOpenAI(chunk_chars=12) as openai:
        openai.script(Reply(text=chemitek_model), Reply(text=chemitek_model))
        openai.transcripts.append(FIRST)
        voice = telegram.add_file(OGG, path="voice/file_7.oga")
        env = {"TELEGRAM_BOT_TOKEN": telegram.token}
        async with running(tmp_path, _config(telegram, openai), env) as child:
            telegram.push_media(ALICE, ALICE, voice=voice)
            await telegram.wait_for(lambda: TRACKING in telegram.bot_texts(ALICE), within=30)
            await asyncio.sleep(1.5)  # the 1 s session expires
            telegram.push_text(ALICE, ALICE, SECOND)
            await telegram.wait_for(lambda: UNDERSTOOD in telegram.bot_texts(ALICE), within=30)
            db = tmp_path / "data" / "chatbridge.db"
            await telegram.wait_for(lambda: inbox_file.pending(db) == 0, within=30)
            ring = await child.memory(f"telegram:{ALICE}")
    assert child.code == 0, child.stderr
    assert [t.model for t in openai.transcriptions] == ["whisper-1"]
    assert [e["user_message"] for e in ring] == [FIRST, SECOND]
    bridged = openai.requests[1].body["messages"][-1]["content"]
    assert bridged.startswith("<conversation_history>")
    assert f"User: {FIRST}" in bridged
    assert bridged.endswith(f"Aktuelle Nachricht: {SECOND}")
    assert telegram.bot_texts(ALICE) == [f"🎤 „{FIRST}“", TRACKING, UNDERSTOOD]


async def test_a_photo_received_before_a_kill_is_answered_after_the_restart(
    tmp_path: Path,
) -> None:
    answer = "Auf dem Etikett steht 1Z999AA10123456784."
    async with FakeTelegram() as telegram, FakeOpenAI(chunk_chars=8) as openai:
        # The first model call never finishes before the kill; the restart's answers.
        openai.script(Reply(text="zu spät", first_chunk_delay=30), Reply(text=answer))
        image = png(5000)
        photo = telegram.add_file(image, path="photos/file_3.jpg")
        env = {"TELEGRAM_BOT_TOKEN": telegram.token}
        db = tmp_path / "data" / "chatbridge.db"
        config = _config(telegram, openai)
        async with running(tmp_path, config, env) as first:
            telegram.push_media(ALICE, ALICE, caption="Was steht da?", photo=[photo])
            await telegram.wait_for(lambda: len(openai.requests) == 1, within=30)
            stored = _pending_messages(db)
            first.process.send_signal(signal.SIGKILL)
            await first.process.wait()
        assert telegram.bot_texts(ALICE) == []
        async with running(tmp_path, config, env):
            await telegram.wait_for(
                lambda: answer in telegram.bot_texts(ALICE) and inbox_file.pending(db) == 0,
                within=40,
            )
    # The inbox held the platform's reference to the photo, not its bytes.
    assert len(stored) == 1
    assert photo in stored[0]
    assert b64(image)[:64] not in stored[0]
    assert len(stored[0]) < 2000
    assert telegram.bot_texts(ALICE) == [answer]
    assert openai_images(openai.requests[-1].body) == [f"data:image/png;base64,{b64(image)}"]
    assert len(telegram.downloads) == 2, "fetched when answering, again after the restart"


def _pending_messages(db: Path) -> list[str]:
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT message FROM inbox WHERE done_at IS NULL").fetchall()
    finally:
        conn.close()
    return [str(row[0]) for row in rows]
