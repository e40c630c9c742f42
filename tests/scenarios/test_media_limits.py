"""Images count toward `limits` through `chatbridge run`: Telegram + OpenAI or Anthropic.

Before a message's images are downloaded, the least request it can make (its
text and each image at the provider's per-image reservation,
`core.media.image_tokens`) is checked against what is left: one that cannot
fit is refused with the limit sentence, and neither `getFile`, the download
nor a model request happens. One that fits is settled with the tokens the
provider reported, the image's included, which `/status` and `chatbridge
usage` show.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import fake_anthropic, fake_openai
from tests.support.cli import free_port, run_cli
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.media import openai_images, png
from tests.support.run_config import run_config_text
from tests.support.running import chatbridge_run

pytestmark = pytest.mark.timeout(120)  # a child per case, four exchanges and `usage`

SMALL, ROOMY = 31001, 31002  # a 3,000-token day; a 20,000-token day
CAPTION = "What does the label say?"
REFUSAL = (
    "Sorry, that would go past your daily token limit, so I will not answer it; "
    "it resets at midnight (Europe/Berlin)."
)


def _config(telegram: FakeTelegram, kind: str, base_url: str) -> str:
    return run_config_text(
        port=free_port(),
        telegram=telegram.base_url,
        openai=base_url,
        allow=(SMALL, ROOMY),
        bot={"language": "en", "timezone": "Europe/Berlin"},
        providers={
            "main": {
                "type": kind,
                "model": "test-model",
                "api_key": "sk-limits-media",
                "max_tokens": 100,
            }
        },
        platforms={"telegram": {"drafts": False}},
        limits={
            "default": {"tokens_per_day": 3000},
            "people": {f"telegram:{ROOMY}": {"tokens_per_day": 20000}},
        },
    )


async def _say(telegram: FakeTelegram, chat: int, push: object) -> str:
    """Push (a callable), then the bot's next message in `chat`."""
    before = len(telegram.bot_texts(chat))
    assert callable(push)
    push()
    await telegram.wait_for(lambda: len(telegram.bot_texts(chat)) > before, within=30)
    return telegram.bot_texts(chat)[before]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_an_image_is_reserved_before_its_download_and_settled_as_reported(
    tmp_path: Path, kind: str
) -> None:
    fake = FakeOpenAI() if kind == "openai" else FakeAnthropic()
    image_tokens = {"openai": fake_openai.IMAGE_TOKENS, "anthropic": fake_anthropic.IMAGE_TOKENS}
    async with FakeTelegram() as telegram, fake:
        small_photo = telegram.add_file(png(3000, seed=1), path="photos/small.jpg")
        roomy_photo = telegram.add_file(png(3000, seed=2), path="photos/roomy.jpg")
        (tmp_path / "chatbridge.yaml").write_text(_config(telegram, kind, fake.base_url))
        env = {"TELEGRAM_BOT_TOKEN": telegram.token}
        async with chatbridge_run(tmp_path, env) as ran:
            # The caption alone fits the small day; with the image it cannot.
            typed = await _say(telegram, SMALL, lambda: telegram.push_text(SMALL, SMALL, CAPTION))
            refused = await _say(telegram, SMALL, lambda: telegram.push_media(
                SMALL, SMALL, caption=CAPTION, photo=[small_photo]))  # fmt: skip
            requests_after_refusal = len(fake.requests)

            answered = await _say(telegram, ROOMY, lambda: telegram.push_media(
                ROOMY, ROOMY, caption=CAPTION, photo=[roomy_photo]))  # fmt: skip
            request = fake.requests[-1]
            status = await _say(
                telegram, ROOMY, lambda: telegram.push_text(ROOMY, ROOMY, "/status")
            )
        assert ran.code == 0, ran.stderr
        usage = await run_cli("usage", "--format", "json", cwd=tmp_path, env={})
    assert usage.code == 0, usage.stderr

    assert typed == "Hello from the fake."
    assert refused == REFUSAL
    assert requests_after_refusal == 1, "the refused photo reached the model"
    assert "photos/small.jpg" not in telegram.downloads, "refused, yet downloaded"
    fetched = [c.params.get("file_id") for c in telegram.calls_to("getFile")]
    assert small_photo not in fetched, "refused, yet getFile was asked"

    assert answered == "Hello from the fake."
    assert telegram.downloads == ["photos/roomy.jpg"]
    if kind == "openai":
        assert len(openai_images(request.body)) == 1
    reported_in, reported_out = fake.prompt_words(request.body), request.deltas
    assert reported_in > image_tokens[kind], "the fake did not count the image"
    people = {p["id"]: p for p in json.loads(usage.stdout)["people"]}
    roomy = people[f"telegram:{ROOMY}"]
    assert (roomy["tokens_in"], roomy["tokens_out"]) == (reported_in, reported_out)
    assert roomy["left"]["tokens_per_day"] == 20_000 - reported_in - reported_out
    assert f"left today: {20_000 - reported_in - reported_out} tokens" in status
    small = people[f"telegram:{SMALL}"]
    assert (small["requests"], small["refused"]) == (1, 1)
