"""Photos, voice messages and files on Telegram, end to end through `chatbridge run`.

Real python-telegram-bot against the fake Bot API (getFile, then the bytes at
`/file/bot<token>/<file_path>`), the real openai SDK against the fake OpenAI
(chat completions and `/v1/audio/transcriptions`), real SQLite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.media import (
    IMAGES_REFUSED,
    MEDIA,
    OGG,
    b64,
    openai_images,
    openai_text,
    png,
    running,
)
from tests.support.run_config import run_config_text

PHOTO, VOICE, TEXT, BIG, BROKEN = 101, 102, 103, 104, 105
USERS = (PHOTO, VOICE, TEXT, BIG, BROKEN)


def _config(
    telegram: FakeTelegram, openai: FakeOpenAI, media: dict[str, Any], vision: bool = True
) -> str:
    return run_config_text(
        port=free_port(),
        telegram=telegram.base_url,
        openai=openai.base_url,
        allow=USERS,
        providers={"main": {"api_key": "sk-media-1234", "vision": vision}},
        platforms={"telegram": {"drafts": False, "edit_interval": "0.2s"}},
        media=media,
    )


async def _answers(telegram: FakeTelegram, chat: int, count: int) -> list[str]:
    await telegram.wait_for(lambda: len(telegram.bot_texts(chat)) >= count, within=30)
    return telegram.bot_texts(chat)


async def test_photo_voice_and_files_reach_the_model(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        image = png(4000)
        small = telegram.add_file(png(900, seed=1), path="photos/file_0.jpg")
        large = telegram.add_file(image, path="photos/file_1.jpg")
        voice = telegram.add_file(OGG, path="voice/file_2.oga")
        notes = telegram.add_file(b"Lieferschein 4711: 3 Paletten", path="documents/notes.txt")
        huge = telegram.add_file(png(60_000), path="documents/huge.png")
        gone = telegram.add_file(png(3000, seed=3), path="photos/file_9.jpg")
        openai.transcripts.append("Wo bleibt mein Chemitek-Paket?")
        env = {"TELEGRAM_BOT_TOKEN": telegram.token}
        async with running(tmp_path, _config(telegram, openai, MEDIA), env) as child:
            telegram.push_media(PHOTO, PHOTO, caption="Was steht auf dem Etikett?",
                                photo=[small, large])  # fmt: skip
            await _answers(telegram, PHOTO, 1)
            photo_request = openai.requests[-1].body

            telegram.push_media(VOICE, VOICE, voice=voice)
            said = await _answers(telegram, VOICE, 2)
            voice_request = openai.requests[-1].body

            telegram.push_media(TEXT, TEXT, caption="Fass das zusammen", document=notes)
            await _answers(telegram, TEXT, 1)
            text_request = openai.requests[-1].body

            telegram.push_media(BIG, BIG, caption="Und das?", document=huge)
            big = await _answers(telegram, BIG, 2)

            telegram.fail_downloads = True
            telegram.push_media(BROKEN, BROKEN, caption="Siehst du das?", photo=[gone])
            broken = await _answers(telegram, BROKEN, 2)
            broken_request = openai.requests[-1].body
            ring = await child.memory(f"telegram:{VOICE}")
            photo_ring = await child.memory(f"telegram:{PHOTO}")
    assert child.code == 0, child.stderr
    assert "Traceback" not in child.stderr
    assert telegram.token not in child.stderr + child.stdout

    # The largest photo size that fits, inline as base64 with the caption.
    assert openai_images(photo_request) == [f"data:image/png;base64,{b64(image)}"]
    assert "Was steht auf dem Etikett?" in openai_text(photo_request)
    assert photo_ring[0]["user_message"] == "[Bild] Was steht auf dem Etikett?"

    # One transcription request, answered as if typed; the ring holds the transcript.
    assert len(openai.transcriptions) == 1
    heard = openai.transcriptions[0]
    assert (heard.model, heard.data, heard.authorization) == (
        "gpt-4o-mini-transcribe",
        OGG,
        "Bearer sk-media-1234",
    )
    assert heard.filename.endswith(".ogg")
    assert openai_text(voice_request) == "Wo bleibt mein Chemitek-Paket?"
    assert said[0] == "🎤 „Wo bleibt mein Chemitek-Paket?“"
    assert said[1] == "Hello from the fake."
    assert ring[0]["user_message"] == "Wo bleibt mein Chemitek-Paket?"

    # A text file's content reaches the model after the caption.
    text = openai_text(text_request)
    assert text.startswith("Fass das zusammen")
    assert "Lieferschein 4711: 3 Paletten" in text

    # Oversized: one sentence, never downloaded, nothing asked of the model for it.
    assert "documents/huge.png" not in telegram.downloads
    assert "huge.png" in big[0]
    assert "50 KB" in big[0]
    assert big[1] == "Hello from the fake."

    # A failed download: one sentence, the caption still answered.
    assert "file_9" not in "".join(telegram.downloads)
    assert "herunterladen" in broken[0]
    assert broken[1] == "Hello from the fake."
    assert openai_images(broken_request) == []
    assert openai_text(broken_request) == "Siehst du das?"


@pytest.mark.parametrize(("media", "vision", "sentence"), IMAGES_REFUSED)
async def test_images_off_and_no_vision_answer_the_caption(
    tmp_path: Path, media: dict[str, Any], vision: bool, sentence: str
) -> None:
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        photo = telegram.add_file(png(1000), path="photos/file_1.jpg")
        env = {"TELEGRAM_BOT_TOKEN": telegram.token}
        async with running(tmp_path, _config(telegram, openai, media, vision), env):
            telegram.push_media(PHOTO, PHOTO, caption="Was ist das?", photo=[photo])
            shown = await _answers(telegram, PHOTO, 2)
            request = openai.requests[-1].body
    assert sentence in shown[0]
    assert shown[1] == "Hello from the fake."
    assert telegram.downloads == [], "an image that cannot be used is not downloaded"
    assert openai_images(request) == []
    assert openai_text(request) == "Was ist das?"
