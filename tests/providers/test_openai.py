"""What the OpenAI provider puts on the wire, and OpenAI-only behaviour."""

from __future__ import annotations

import pytest

from chatbridge.core.models import Turn
from chatbridge.providers._wire import retry_after_seconds, status_detail
from chatbridge.providers.base import Prompt
from chatbridge.providers.openai import OpenAIProvider, is_openai_itself
from tests.providers.conftest import KEY, PROMPT, TEXT, Backend, collect
from tests.support.closing import Closing
from tests.support.fake_openai import FakeOpenAI


async def test_system_prompt_goes_first_then_the_turns(openai_backend: Backend) -> None:
    prompt = Prompt(
        system="Be brief.",
        messages=(Turn("user", "Hi"), Turn("assistant", "Hello!"), Turn("user", "Bye")),
    )
    outcome = await collect(openai_backend.provider(max_tokens=77), prompt)
    assert outcome.text == TEXT
    body = openai_backend.fake.requests[0].body
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Bye"},
    ]
    assert body["model"] == "openai-fake-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    # A custom base_url means a compatible server: it gets the classic parameter name.
    assert body["max_tokens"] == 77
    assert "max_completion_tokens" not in body


async def test_empty_system_prompt_is_left_out(openai_backend: Backend) -> None:
    await collect(openai_backend.provider(), Prompt("", (Turn("user", "Hi"),)))
    assert openai_backend.fake.requests[0].body["messages"] == [{"role": "user", "content": "Hi"}]


async def test_key_is_sent_as_bearer(openai_backend: Backend) -> None:
    await collect(openai_backend.provider())
    assert openai_backend.fake.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_no_key_sends_a_placeholder_for_local_servers(openai_backend: Backend) -> None:
    outcome = await collect(openai_backend.provider(api_key=None))
    assert outcome.error is None
    assert outcome.text == TEXT
    assert openai_backend.fake.requests[0].headers["authorization"] == "Bearer not-needed"


async def test_one_client_serves_many_requests(openai_backend: Backend) -> None:
    provider = openai_backend.provider()
    client = provider._client
    for _ in range(3):
        assert (await collect(provider, PROMPT)).text == TEXT
    assert provider._client is client
    assert len(openai_backend.fake.requests) == 3


async def test_official_api_gets_max_completion_tokens(
    monkeypatch: pytest.MonkeyPatch, closing: Closing
) -> None:
    async with FakeOpenAI() as fake:
        # base_url=None means "OpenAI itself"; the SDK then reads OPENAI_BASE_URL,
        # which lets the fake stand in for api.openai.com.
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        provider = OpenAIProvider(
            "main", model="gpt", api_key=KEY, base_url=None, timeout=5, max_retries=0,
            max_tokens=9,
        )  # fmt: skip
        closing(provider)
        async for _ in provider.stream(PROMPT):
            pass
    body = fake.requests[-1].body
    assert body["max_completion_tokens"] == 9
    assert "max_tokens" not in body


def test_retry_after_prefers_milliseconds_and_ignores_dates() -> None:
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None
    assert retry_after_seconds({"retry-after": "-1"}) is None
    assert retry_after_seconds({}) is None


def test_status_detail_never_shows_auth_text_or_the_key() -> None:
    assert status_detail(401, "invalid_api_key", f"key {KEY[:6]}***", KEY) == (
        "HTTP 401 invalid_api_key"
    )
    assert status_detail(400, "bad type!", f"no\n{KEY}.", KEY) == 'HTTP 400: "no ***"'
    assert len(status_detail(404, None, "x" * 500, None)) < 140


def test_openai_itself_is_recognised_by_host_not_by_a_missing_base_url() -> None:
    assert is_openai_itself(None)
    assert is_openai_itself("https://api.openai.com/v1")
    assert not is_openai_itself("http://localhost:11434/v1")
    assert not is_openai_itself("https://openrouter.ai/api/v1")
