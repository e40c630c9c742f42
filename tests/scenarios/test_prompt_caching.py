"""Prompt caching through the real engine and the real SDKs: what each request
repeats of the previous one, the cache key per conversation, and cached tokens
in /status and /metrics."""

from __future__ import annotations

import itertools

from chatbridge.core.models import ChatKind
from chatbridge.providers.anthropic import AnthropicProvider
from chatbridge.providers.openai import OpenAIProvider
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_openai import FakeOpenAI
from tests.support.sse import Reply
from tests.support.testbot import ALICE, TestBots

QUESTIONS = [
    "Wo bleibt mein Chemitek-Paket 1Z999AA10123456784?",
    "Wann kommt es an?",
    "Kann ich es an die Packstation umleiten?",
    "Und wenn ich nicht da bin?",
    "Danke, was kostet das?",
]


def _answer(body: dict[str, object]) -> str:
    """A deterministic answer per question, with whitespace the engine strips."""
    messages = body["messages"]
    assert isinstance(messages, list)
    return f"  Antwort auf Nachricht {len(messages)}.\n"


def _openai(fake: FakeOpenAI) -> OpenAIProvider:
    return OpenAIProvider(
        "main", model="gpt-test", api_key="sk-test", base_url=fake.base_url,
        timeout=5.0, max_retries=0, max_tokens=256,
    )  # fmt: skip


async def test_each_openai_request_repeats_the_previous_one_byte_for_byte(
    testbot: TestBots,
) -> None:
    async with FakeOpenAI() as fake:
        fake.script(*[Reply(text=_answer) for _ in range(len(QUESTIONS) + 1)])
        provider = _openai(fake)
        bot = await testbot(provider=provider)
        try:
            for question in QUESTIONS:
                await bot.say(question)
            await bot.say("Hallo", user="42")  # another conversation
            status = await bot.say("/status")
            metrics = bot.engine.metrics.render().decode()
        finally:
            await provider.aclose()

    bodies = [r.body for r in fake.requests]
    alice, other = bodies[: len(QUESTIONS)], bodies[len(QUESTIONS)]
    for before, after in itertools.pairwise(alice):
        answer = before["messages"]  # the previous request's messages, unchanged
        assert after["messages"][: len(answer)] == answer
        added = after["messages"][len(answer) :]
        assert added[0] == {"role": "assistant", "content": _answer(before).strip()}
        assert added[1]["role"] == "user"
        assert len(added) == 2
    # The first message of the session carries the bridging block; the rest follow it.
    assert alice[0]["messages"][0]["role"] == "system"
    keys = {body["prompt_cache_key"] for body in alice}
    assert len(keys) == 1, "one prompt_cache_key per conversation"
    (key,) = keys
    assert other["prompt_cache_key"] != key, "another conversation, another key"
    assert ALICE not in key
    # Each request found the whole previous prompt in the fake's cache; the last
    # one's figure is in /status, the sum in /metrics.
    last_cached = fake.prompt_words(alice[-2])
    last_input = fake.prompt_words(alice[-1])
    assert f"Prompt-Cache: {last_cached} der {last_input} Eingabe-Tokens" in status
    cached_total = sum(fake.prompt_words(body) for body in alice[:-1])
    assert f"chatbridge_cached_input_tokens_total {float(cached_total)}" in metrics


async def test_anthropic_caches_the_bridging_block_once_it_is_an_earlier_turn(
    testbot: TestBots,
) -> None:
    async with FakeAnthropic() as fake:
        provider = AnthropicProvider(
            "main", model="claude-test", api_key="sk-test", base_url=fake.base_url,
            timeout=5.0, max_retries=0, max_tokens=256,
        )  # fmt: skip
        bot = await testbot(provider=provider)
        try:
            await bot.say("Merk dir: Sendung 1Z999AA10123456784")
            bot.clock.advance(3600)  # a gap: the next message opens a session with a bridge
            await bot.say(QUESTIONS[1])
            await bot.say(QUESTIONS[2])
            status = await bot.say("/status")
            group_status = await bot.say("/status", chat="-100", kind=ChatKind.GROUP)
        finally:
            await provider.aclose()

    bridged, follow_up = fake.requests[1].body, fake.requests[2].body
    (block,) = bridged["messages"][0]["content"]
    assert "<conversation_history>" in block["text"]
    assert "1Z999AA10123456784" in block["text"]
    assert block["cache_control"] == {"type": "ephemeral"}  # written with its bridging block
    # The next request starts with it (now an earlier turn) and reads it back.
    assert follow_up["messages"][0]["content"] == block["text"]
    assert follow_up["system"][0]["cache_control"] == {"type": "ephemeral"}
    read = fake.prompt_words(bridged)
    assert f"Prompt-Cache: {read} der {fake.prompt_words(follow_up)} Eingabe-Tokens" in status
    assert "Prompt-Cache" not in group_status, "a group sees no one's token use"
