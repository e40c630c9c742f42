"""Photos, voice messages and files on Discord, end to end through `chatbridge run`.

Real discord.py against the fake gateway and REST API; attachments are
fetched from their signed CDN URLs on the fake; real openai SDK; real SQLite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import free_port
from tests.support.fake_discord import FakeDiscord
from tests.support.fake_openai import FakeOpenAI
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

pytestmark = pytest.mark.timeout(90)

PHOTO, VOICE, TEXT, BIG, BROKEN = 9001, 9002, 9003, 9004, 9005
USERS = (PHOTO, VOICE, TEXT, BIG, BROKEN)


def _config(
    discord: FakeDiscord, openai: FakeOpenAI, media: dict[str, Any], vision: bool = True
) -> str:
    return run_config_text(
        port=free_port(),
        openai=openai.base_url,
        allow=[f"discord:{u}" for u in USERS],
        providers={"main": {"api_key": "sk-media-1234", "vision": vision}},
        platforms={
            "discord": {
                "enabled": True,
                "api_base": discord.api_base,
                "gateway_url": discord.gateway_url,
                "edit_interval": "0.2s",
            }
        },
        media=media,
    )


async def _answers(discord: FakeDiscord, user: int, count: int) -> list[str]:
    dm = discord.dm_channel(user)
    await discord.wait_for(lambda: len(discord.bot_texts(dm)) >= count, within=30)
    return discord.bot_texts(dm)


async def _connected(discord: FakeDiscord) -> None:
    await discord.wait_for(lambda: discord.connected, within=30)


async def test_photo_voice_and_files_reach_the_model(tmp_path: Path) -> None:
    async with FakeDiscord() as discord, FakeOpenAI() as openai:
        image = png(4000)
        photo = discord.attachment(image, "etikett.jpg", "image/jpeg")
        voice = discord.attachment(OGG, "voice-message.ogg", "audio/ogg", voice=True)
        notes = discord.attachment(b"Lieferschein 4711: 3 Paletten", "notes.txt", "text/plain")
        huge = discord.attachment(png(60_000), "huge.png", "image/png")
        lying = discord.attachment(png(60_000, seed=2), "small.png", "image/png",
                                   reported_size=1000)  # fmt: skip
        gone = discord.attachment(png(3000, seed=3), "gone.png", "image/png")
        openai.transcripts.append("Wo bleibt mein Chemitek-Paket?")
        env = {"DISCORD_BOT_TOKEN": discord.token}
        async with running(tmp_path, _config(discord, openai, MEDIA), env) as child:
            await _connected(discord)
            await discord.send_dm_files("Was steht auf dem Etikett?", [photo], author=PHOTO)
            await _answers(discord, PHOTO, 1)
            photo_request = openai.requests[-1].body

            await discord.send_dm_files("", [voice], author=VOICE)
            said = await _answers(discord, VOICE, 2)
            voice_request = openai.requests[-1].body

            await discord.send_dm_files("Fass das zusammen", [notes], author=TEXT)
            await _answers(discord, TEXT, 1)
            text_request = openai.requests[-1].body

            await discord.send_dm_files("Und das?", [huge, lying], author=BIG)
            big = await _answers(discord, BIG, 3)

            discord.fail_downloads = True
            await discord.send_dm_files("Siehst du das?", [gone], author=BROKEN)
            broken = await _answers(discord, BROKEN, 2)
            broken_request = openai.requests[-1].body
            ring = await child.memory(f"discord:{VOICE}")
            photo_ring = await child.memory(f"discord:{PHOTO}")
    assert child.code == 0, child.stderr
    assert "Traceback" not in child.stderr
    assert discord.token not in child.stderr + child.stdout

    assert openai_images(photo_request) == [f"data:image/png;base64,{b64(image)}"]
    assert "Was steht auf dem Etikett?" in openai_text(photo_request)
    assert photo_ring[0]["user_message"] == "[Bild] Was steht auf dem Etikett?"

    assert len(openai.transcriptions) == 1
    assert openai.transcriptions[0].data == OGG
    assert openai_text(voice_request) == "Wo bleibt mein Chemitek-Paket?"
    assert said == ["🎤 „Wo bleibt mein Chemitek-Paket?“", "Hello from the fake."]
    assert ring[0]["user_message"] == "Wo bleibt mein Chemitek-Paket?"

    text = openai_text(text_request)
    assert text.startswith("Fass das zusammen")
    assert "Lieferschein 4711: 3 Paletten" in text

    # Announced too large: never fetched. Announced small but larger: the
    # download stops at the cap. One sentence each; the text is answered.
    assert not any(path.endswith("huge.png") for path in discord.downloads)
    assert "huge.png" in big[0]
    assert "small.png" in big[1]
    assert big[2] == "Hello from the fake."

    assert "herunterladen" in broken[0]
    assert broken[1] == "Hello from the fake."
    assert openai_images(broken_request) == []
    assert openai_text(broken_request) == "Siehst du das?"


@pytest.mark.parametrize(("media", "vision", "sentence"), IMAGES_REFUSED)
async def test_images_off_and_no_vision_answer_the_caption(
    tmp_path: Path, media: dict[str, Any], vision: bool, sentence: str
) -> None:
    async with FakeDiscord() as discord, FakeOpenAI() as openai:
        photo = discord.attachment(png(1000), "bild.png", "image/png")
        env = {"DISCORD_BOT_TOKEN": discord.token}
        async with running(tmp_path, _config(discord, openai, media, vision), env):
            await _connected(discord)
            await discord.send_dm_files("Was ist das?", [photo], author=PHOTO)
            shown = await _answers(discord, PHOTO, 2)
            request = openai.requests[-1].body
    assert sentence in shown[0]
    assert shown[1] == "Hello from the fake."
    assert discord.downloads == []
    assert openai_images(request) == []
    assert openai_text(request) == "Was ist das?"
