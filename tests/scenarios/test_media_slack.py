"""Photos, voice clips and files on Slack, end to end through `chatbridge run`.

Real slack-bolt in Socket Mode against the fake Slack; files come from
`url_private_download`, which wants the bot token and the `files:read` scope
(else Slack's HTML login page); real openai SDK; real SQLite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import fake_slack_events as ev
from tests.support.cli import free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack
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

PHOTO, VOICE, TEXT, BIG, BROKEN = "U0PHOTO", "U0VOICE", "U0TEXT", "U0BIG", "U0BROKEN"
USERS = (PHOTO, VOICE, TEXT, BIG, BROKEN)


def _dm(user: str) -> str:
    return "D" + user[1:]


def _config(
    slack: FakeSlack, openai: FakeOpenAI, media: dict[str, Any], vision: bool = True
) -> str:
    return run_config_text(
        port=free_port(),
        openai=openai.base_url,
        allow=[f"slack:{u}" for u in USERS],
        providers={"main": {"api_key": "sk-media-1234", "vision": vision}},
        platforms={
            "slack": {
                "enabled": True,
                "bot_token": "${SLACK_BOT_TOKEN}",
                "app_token": "${SLACK_APP_TOKEN}",
                "base_url": slack.base_url,
                "edit_interval": "0.2s",
            }
        },
        media=media,
    )


ENV = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}


async def _send(slack: FakeSlack, user: str, text: str, files: list[dict]) -> None:
    await slack.wait_for(lambda: slack.connected, within=30)
    await slack.socket_event(ev.file_share(text, files, user=user, channel=_dm(user)))


async def _answers(slack: FakeSlack, user: str, count: int) -> list[str]:
    await slack.wait_for(lambda: len(slack.bot_texts(_dm(user))) >= count, within=30)
    return slack.bot_texts(_dm(user))


async def test_photo_voice_and_files_reach_the_model(tmp_path: Path) -> None:
    async with FakeSlack() as slack, FakeOpenAI() as openai:
        image = png(4000)
        photo = slack.add_file(image, "etikett.png", "image/png")
        clip = slack.add_file(OGG, "audio_message.webm", "audio/webm", clip=True)
        notes = slack.add_file(b"Lieferschein 4711: 3 Paletten", "notes.txt", "text/plain")
        huge = slack.add_file(png(60_000), "huge.png", "image/png")
        gone = slack.add_file(png(3000, seed=3), "gone.png", "image/png")
        openai.transcripts.append("Wo bleibt mein Chemitek-Paket?")
        async with running(tmp_path, _config(slack, openai, MEDIA), ENV) as child:
            await _send(slack, PHOTO, "Was steht auf dem Etikett?", [photo])
            await _answers(slack, PHOTO, 1)
            photo_request = openai.requests[-1].body

            await _send(slack, VOICE, "", [clip])
            said = await _answers(slack, VOICE, 1)
            voice_request = openai.requests[-1].body

            await _send(slack, TEXT, "Fass das zusammen", [notes])
            await _answers(slack, TEXT, 1)
            text_request = openai.requests[-1].body

            await _send(slack, BIG, "Und das?", [huge])
            big = await _answers(slack, BIG, 2)

            slack.fail_downloads = True
            await _send(slack, BROKEN, "Siehst du das?", [gone])
            broken = await _answers(slack, BROKEN, 2)
            broken_request = openai.requests[-1].body
            ring = await child.memory(f"slack:{VOICE}")
    assert child.code == 0, child.stderr
    assert "Traceback" not in child.stderr
    assert BOT_TOKEN not in child.stderr + child.stdout

    assert openai_images(photo_request) == [f"data:image/png;base64,{b64(image)}"]
    assert "Was steht auf dem Etikett?" in openai_text(photo_request)

    # A Slack clip: Slack shows its own transcript, so the answer does not repeat it.
    assert [t.data for t in openai.transcriptions] == [OGG]
    assert openai.transcriptions[0].filename.endswith(".webm")
    assert openai_text(voice_request) == "Wo bleibt mein Chemitek-Paket?"
    assert said == ["Hello from the fake."]
    assert ring[0]["user_message"] == "Wo bleibt mein Chemitek-Paket?"

    assert "Lieferschein 4711: 3 Paletten" in openai_text(text_request)

    assert huge["id"] not in slack.downloads
    assert "huge.png" in big[0]
    assert big[1] == "Hello from the fake."

    assert "herunterladen" in broken[0]
    assert broken[1] == "Hello from the fake."
    assert openai_images(broken_request) == []


async def test_without_files_read_the_login_page_is_refused(tmp_path: Path) -> None:
    async with FakeSlack() as slack, FakeOpenAI() as openai:
        slack.scopes.discard("files:read")
        photo = slack.add_file(png(1000), "bild.png", "image/png")
        async with running(tmp_path, _config(slack, openai, {"images": True}), ENV) as child:
            await _send(slack, PHOTO, "Was ist das?", [photo])
            shown = await _answers(slack, PHOTO, 2)
            request = openai.requests[-1].body
    assert child.code == 0, child.stderr
    assert "herunterladen" in shown[0]
    assert shown[1] == "Hello from the fake."
    assert openai_images(request) == []
    assert "Sign in" not in openai_text(request)


@pytest.mark.parametrize(("media", "vision", "sentence"), IMAGES_REFUSED)
async def test_images_off_and_no_vision_answer_the_caption(
    tmp_path: Path, media: dict[str, Any], vision: bool, sentence: str
) -> None:
    async with FakeSlack() as slack, FakeOpenAI() as openai:
        photo = slack.add_file(png(1000), "bild.png", "image/png")
        async with running(tmp_path, _config(slack, openai, media, vision), ENV):
            await _send(slack, PHOTO, "Was ist das?", [photo])
            shown = await _answers(slack, PHOTO, 2)
            request = openai.requests[-1].body
    assert sentence in shown[0]
    assert shown[1] == "Hello from the fake."
    assert slack.downloads == []
    assert openai_images(request) == []
    assert openai_text(request) == "Was ist das?"
