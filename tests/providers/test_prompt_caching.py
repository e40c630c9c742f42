"""Prompt caching on the wire: Anthropic's breakpoints, OpenAI's cache key, cached usage."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from chatbridge.core.models import Turn
from chatbridge.providers.anthropic import cached_request
from chatbridge.providers.base import Prompt
from chatbridge.providers.openai import OpenAIProvider
from tests.providers.conftest import Backend, collect
from tests.support.fake_anthropic import MAX_BREAKPOINTS
from tests.support.sse import Fault

CACHED = {"type": "ephemeral"}
SYSTEM = "You answer questions about Chemitek parcels, briefly and politely."


def _session(exchanges: int) -> Prompt:
    """A live session `exchanges` answers long, then the current message."""
    turns: list[Turn] = []
    for i in range(exchanges):
        turns += [Turn("user", f"Frage {i} zur Sendung 1Z999"), Turn("assistant", f"Antwort {i}.")]
    return Prompt(SYSTEM, (*turns, Turn("user", "Und jetzt?")), cache_key="cb-test")


def _marked(body: dict[str, Any]) -> list[str]:
    """Where the request's cache breakpoints are: "system" or "messages[i]"."""
    found: list[str] = []
    system = body.get("system")
    if isinstance(system, list):
        found += ["system" for block in system if "cache_control" in block]
    for index, message in enumerate(body["messages"]):
        content = message["content"]
        if isinstance(content, list):
            found += [f"messages[{index}]" for block in content if "cache_control" in block]
    return found


async def test_anthropic_marks_the_system_prompt_and_the_whole_conversation(
    anthropic_backend: Backend,
) -> None:
    outcome = await collect(anthropic_backend.provider(), _session(3))
    assert outcome.error is None
    body = anthropic_backend.fake.requests[0].body
    # The newest message closes the prefix the next request of the session starts with.
    assert _marked(body) == ["system", "messages[6]"]
    assert body["system"] == [{"type": "text", "text": SYSTEM, "cache_control": CACHED}]
    assert body["messages"][6]["content"] == [
        {"type": "text", "text": "Und jetzt?", "cache_control": CACHED}
    ]
    assert body["messages"][5] == {"role": "assistant", "content": "Antwort 2."}


async def test_anthropic_without_a_system_prompt_marks_the_messages_only(
    anthropic_backend: Backend,
) -> None:
    await collect(anthropic_backend.provider(), Prompt("", _session(0).messages))
    body = anthropic_backend.fake.requests[0].body
    assert "system" not in body
    assert _marked(body) == ["messages[0]"]


def test_anthropic_breakpoints_stay_within_the_limit_for_any_session_length() -> None:
    for exchanges in range(0, 45):
        prompt = _session(exchanges)
        messages = [{"role": t.role, "content": t.content} for t in prompt.messages]
        request = cached_request(prompt.system, messages)
        count = len(request.get("system", [])) + sum(
            1
            for m in request["messages"]
            if isinstance(m["content"], list)
            for block in m["content"]
            if "cache_control" in block
        )
        assert 1 <= count <= MAX_BREAKPOINTS


async def test_anthropic_reports_tokens_read_from_the_cache(anthropic_backend: Backend) -> None:
    provider = anthropic_backend.provider()
    first = await collect(provider, _session(1))
    follow_up = (*_session(1).messages, Turn("assistant", "Gern."), Turn("user", "Danke"))
    second = await collect(provider, Prompt(SYSTEM, follow_up))  # the session, one exchange on
    assert first.usage is not None
    assert second.usage is not None
    fake = anthropic_backend.fake
    # The first request found nothing; the second reads all the first one wrote.
    assert first.usage.cached_input_tokens == 0
    assert second.usage.cached_input_tokens == fake.prompt_words(fake.requests[0].body)
    # input_tokens is the whole prompt, cache reads and writes included.
    assert second.usage.input_tokens == fake.prompt_words(fake.requests[1].body)


async def test_openai_sends_the_prompt_cache_key_and_reports_cached_tokens(
    openai_backend: Backend,
) -> None:
    provider = openai_backend.provider()
    first = await collect(provider, _session(1))
    follow_up = (*_session(1).messages, Turn("assistant", "Gern."), Turn("user", "Danke"))
    second = await collect(provider, Prompt(SYSTEM, follow_up, cache_key="cb-test"))
    bodies = [r.body for r in openai_backend.fake.requests]
    assert [b["prompt_cache_key"] for b in bodies] == ["cb-test", "cb-test"]
    assert first.usage is not None
    assert second.usage is not None
    assert first.usage.cached_input_tokens == 0
    # Everything the first request sent is the start of the second.
    assert second.usage.cached_input_tokens == openai_backend.fake.prompt_words(bodies[0])


async def test_openai_without_a_cache_key_sends_none(openai_backend: Backend) -> None:
    await collect(openai_backend.provider(), Prompt(SYSTEM, (Turn("user", "Hi"),)))
    assert "prompt_cache_key" not in openai_backend.fake.requests[0].body


async def test_a_server_rejecting_the_cache_key_gets_requests_without_it(
    openai_backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    openai_backend.fake.script(
        Fault.status_error(
            400, "invalid_request_error", "Unrecognized request argument supplied: prompt_cache_key"
        )
    )
    provider = openai_backend.provider()
    assert isinstance(provider, OpenAIProvider)
    with caplog.at_level(logging.WARNING, logger="chatbridge.providers.openai"):
        first = await collect(provider, _session(0))
        second = await collect(provider, _session(0))
    assert first.error is None
    assert second.error is None
    assert [("prompt_cache_key" in r.body) for r in openai_backend.fake.requests] == [
        True,
        False,
        False,
    ]
    rejected = [r for r in caplog.records if "prompt_cache_key" in r.getMessage()]
    assert len(rejected) == 1


async def test_another_400_is_not_retried_without_the_key(openai_backend: Backend) -> None:
    openai_backend.fake.script(Fault.status_error(400, "invalid_request_error", "max_tokens bad"))
    outcome = await collect(openai_backend.provider(), _session(0))
    assert outcome.error is not None
    assert len(openai_backend.fake.requests) == 1


def test_cache_keys_are_per_conversation_and_carry_no_user_id() -> None:
    alice = Prompt.cache_key_for("telegram:579304651::579304651")
    bob = Prompt.cache_key_for("telegram:42::42")
    assert alice == Prompt.cache_key_for("telegram:579304651::579304651")
    assert alice != bob
    assert "579304651" not in alice
