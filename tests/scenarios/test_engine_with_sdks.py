"""The real engine driving the real openai/anthropic SDKs against the fakes."""

from __future__ import annotations

import asyncio

import pytest

from chatbridge.providers.anthropic import AnthropicProvider
from chatbridge.providers.base import Provider
from chatbridge.providers.openai import OpenAIProvider
from tests.support.closing import Closing
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_openai import FakeOpenAI
from tests.support.sse import FakeSSEServer, Reply
from tests.support.testbot import ALICE, TestBots


def _provider(kind: str, fake: FakeSSEServer) -> Provider:
    cls = OpenAIProvider if kind == "openai" else AnthropicProvider
    return cls(
        "main",
        model="test-model",
        api_key="sk-test",
        base_url=fake.base_url,
        timeout=5.0,
        max_retries=0,
        max_tokens=256,
    )


FAKES = {"openai": FakeOpenAI, "anthropic": FakeAnthropic}


@pytest.mark.parametrize("kind", sorted(FAKES))
async def test_new_stops_the_http_stream_in_flight(
    kind: str, testbot: TestBots, closing: Closing
) -> None:
    async with FAKES[kind]() as fake:
        fake.script(Reply(text="word " * 200, chunk_chars=5, chunk_delay=0.02))
        provider = closing(_provider(kind, fake))
        bot = await testbot(provider=provider)
        pending = asyncio.create_task(bot.say("Erzähl mir was Langes"))
        assert await fake.wait_streams(1), "the answer's stream never opened"
        await bot.say("/new")
        await asyncio.wait_for(pending, 30)  # a hang detector; closed_by_client below is the check
        assert await fake.wait_idle(), "the HTTP stream was left open"
        assert fake.streams.closed_by_client == 1
        assert await bot.engine.store.ring(f"telegram:{ALICE}", since=0.0) == []


@pytest.mark.parametrize("kind", sorted(FAKES))
async def test_usage_from_the_sdk_is_counted_and_shown_in_status(
    kind: str, testbot: TestBots, closing: Closing
) -> None:
    async with FAKES[kind]() as fake:
        fake.script(Reply(text="Hallo!", usage=(120, 7)))
        provider = closing(_provider(kind, fake))
        bot = await testbot(provider=provider)
        assert await bot.say("Hi") == "Hallo!"
        status = await bot.say("/status")
        assert "Tokens heute: 120 rein, 7 raus" in status
        assert "test-model (main)" in status
