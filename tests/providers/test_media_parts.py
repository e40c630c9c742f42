"""Images, PDFs and voice on the wire: the real SDKs against the fake servers."""

from __future__ import annotations

import base64

import pytest

from chatbridge.core.models import MediaPart, Turn
from chatbridge.providers._wire import media_accepted
from chatbridge.providers.anthropic import AnthropicProvider
from chatbridge.providers.base import (
    MediaRejected,
    Prompt,
    ProviderMisconfigured,
    TextDelta,
)
from chatbridge.providers.openai import OpenAIProvider
from chatbridge.providers.transcription import OpenAITranscriber, upload_name
from tests.support.closing import Closing
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_openai import FakeOpenAI
from tests.support.media import OGG, PDF, png
from tests.support.sse import Fault, Reply

IMAGE = png(300)
IMAGE_B64 = base64.b64encode(IMAGE).decode()
PDF_B64 = base64.b64encode(PDF).decode()
PARTS = (MediaPart("image", "image/png", IMAGE_B64.encode(), "photo.jpg"),
         MediaPart("document", "application/pdf", PDF_B64.encode(), "brief.pdf"))  # fmt: skip
PROMPT = Prompt(
    system="sys",
    messages=(
        Turn("user", "[Bild] Was steht da?", parts=PARTS[:1]),
        Turn("assistant", "Ein Etikett."),
        Turn("user", "[PDF brief.pdf] Und hier?", parts=PARTS[1:]),
    ),
)


async def _drain(provider: OpenAIProvider | AnthropicProvider, prompt: Prompt) -> None:
    async for _ in provider.stream(prompt):
        pass


def _openai(base_url: str | None, *, vision: bool = True) -> OpenAIProvider:
    return OpenAIProvider("main", model="gpt", api_key="sk-test", base_url=base_url, timeout=5,
                          max_retries=0, max_tokens=50, vision=vision)  # fmt: skip


def test_what_each_entry_takes() -> None:
    assert media_accepted("openai", vision=True, base_url=None) == {"image", "document"}
    assert media_accepted("openai", vision=True, base_url="http://localhost:11434/v1") == {"image"}
    assert media_accepted("openai", vision=False, base_url="http://x/v1") == frozenset()
    assert media_accepted("anthropic", vision=False, base_url=None) == {"document"}


async def test_openai_itself_gets_data_url_images_and_file_inputs(
    monkeypatch: pytest.MonkeyPatch, closing: Closing
) -> None:
    async with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)  # stands in for api.openai.com
        provider = _openai(None)
        closing(provider)
        await _drain(provider, PROMPT)
    first, _, last = fake.requests[-1].body["messages"][1:]
    assert first["content"] == [
        {"type": "text", "text": "[Bild] Was steht da?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE_B64}"}},
    ]
    assert last["content"][1] == {
        "type": "file",
        "file": {"filename": "brief.pdf", "file_data": f"data:application/pdf;base64,{PDF_B64}"},
    }


async def test_a_request_with_an_image_is_retried_whole_by_the_sdk(closing: Closing) -> None:
    async with FakeOpenAI() as fake:
        fake.script(Fault.server_error(500), Reply(text="Ein Etikett."))
        provider = OpenAIProvider("main", model="gpt", api_key="sk-test", base_url=fake.base_url,
                                  timeout=5, max_retries=1, max_tokens=50)  # fmt: skip
        closing(provider)
        texts = [e.text async for e in provider.stream(PROMPT) if isinstance(e, TextDelta)]
    assert "".join(texts) == "Ein Etikett."
    assert len(fake.requests) == 2
    for request in fake.requests:
        image = request.body["messages"][1]["content"][1]
        assert image["image_url"]["url"] == f"data:image/png;base64,{IMAGE_B64}"
        assert int(request.headers["content-length"]) > len(IMAGE_B64)


async def test_a_compatible_server_refusing_images_is_media_rejected(closing: Closing) -> None:
    async with FakeOpenAI() as fake:
        fake.reject_images = True
        provider = _openai(fake.base_url)
        closing(provider)
        with pytest.raises(MediaRejected):
            await _drain(provider, PROMPT)
        # Without images the same server answers; the PDF was never sent to it.
        await _drain(provider, Prompt(system="", messages=(Turn("user", "hi"),)))
    sent = fake.requests[0].body["messages"]
    assert sent[-1]["content"] == "[PDF brief.pdf] Und hier?"


async def test_vision_false_sends_no_image(closing: Closing) -> None:
    async with FakeOpenAI() as fake:
        provider = _openai(fake.base_url, vision=False)
        closing(provider)
        await _drain(provider, PROMPT)
    assert fake.requests[-1].body["messages"][1]["content"] == "[Bild] Was steht da?"


async def test_anthropic_gets_base64_blocks_before_the_text(closing: Closing) -> None:
    async with FakeAnthropic() as fake:
        provider = AnthropicProvider("claude", model="c", api_key="ak", base_url=fake.base_url,
                                     timeout=5, max_retries=0, max_tokens=50)  # fmt: skip
        closing(provider)
        await _drain(provider, PROMPT)
    first, _, last = fake.requests[-1].body["messages"]
    assert first["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": IMAGE_B64}},
        {"type": "text", "text": "[Bild] Was steht da?"},
    ]  # fmt: skip
    assert last["content"][0]["type"] == "document"
    assert last["content"][0]["source"]["data"] == PDF_B64
    assert last["content"][-1] == {"type": "text", "text": "[PDF brief.pdf] Und hier?",
                                   "cache_control": {"type": "ephemeral"}}  # fmt: skip


async def test_transcription_with_the_official_sdk(closing: Closing) -> None:
    async with FakeOpenAI() as fake:
        fake.transcripts.append("Soll Mittwoch kommen")
        hearing = OpenAITranscriber("main", model="gpt-4o-mini-transcribe", api_key="sk-t",
                                    base_url=fake.base_url, timeout=5, max_retries=0)  # fmt: skip
        closing(hearing)
        text = await hearing.transcribe(bytearray(OGG), name="voice.oga", mime="audio/ogg")
    assert text == "Soll Mittwoch kommen"
    [sent] = fake.transcriptions
    assert (sent.model, sent.filename, sent.data) == ("gpt-4o-mini-transcribe", "voice.ogg", OGG)


async def test_a_rejected_transcription_key_names_the_entry_not_the_key(closing: Closing) -> None:
    async with FakeOpenAI(api_key="sk-right") as fake:
        hearing = OpenAITranscriber("main", model="whisper-1", api_key="sk-wrong",
                                    base_url=fake.base_url, timeout=5, max_retries=0)  # fmt: skip
        closing(hearing)
        with pytest.raises(ProviderMisconfigured) as caught:
            await hearing.transcribe(OGG, name="v.ogg", mime="audio/ogg")
    assert "providers.main" in str(caught.value)
    assert "sk-wrong" not in str(caught.value)


def test_upload_names_carry_a_suffix_openai_knows() -> None:
    assert upload_name("voice.oga", "audio/ogg") == "voice.ogg"
    assert upload_name("voice-message.ogg", "audio/ogg") == "voice-message.ogg"
    assert upload_name("clip", "audio/webm") == "clip.webm"
    assert upload_name("aufnahme.m4a", "") == "aufnahme.m4a"
