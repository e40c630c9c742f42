"""Fixtures: real SDK providers pointed at the fake servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from chatbridge.core.models import Turn, Usage
from chatbridge.providers.anthropic import AnthropicProvider
from chatbridge.providers.base import Prompt, Provider, ProviderError, TextDelta, UsageReport
from chatbridge.providers.openai import OpenAIProvider
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_openai import FakeOpenAI
from tests.support.sse import FakeSSEServer

KEY = "sk-test-SECRET-0123456789"
TEXT = "The quick brown fox jumps over the lazy dog."
PROMPT = Prompt(system="You are terse.", messages=(Turn("user", "Say hello"),))
PROMPT_WORDS = 5  # what the fakes count for PROMPT: "You are terse." + "Say hello"


@dataclass(slots=True)
class Outcome:
    """What a consumer saw: every delta, the usage report, and the error if any."""

    deltas: list[str] = field(default_factory=list)
    usage: Usage | None = None
    error: ProviderError | None = None

    @property
    def text(self) -> str:
        return "".join(self.deltas)


async def collect(provider: Provider, prompt: Prompt = PROMPT) -> Outcome:
    """Drain `provider.stream(prompt)`, keeping a `ProviderError` instead of raising."""
    outcome = Outcome()
    try:
        async for event in provider.stream(prompt):
            if isinstance(event, TextDelta):
                outcome.deltas.append(event.text)
            elif isinstance(event, UsageReport):
                assert outcome.usage is None, "more than one UsageReport"
                outcome.usage = event.usage
    except ProviderError as exc:
        outcome.error = exc
    return outcome


@dataclass(slots=True)
class Backend:
    """One fake server plus a maker of providers aimed at it (closed at teardown)."""

    kind: str
    fake: FakeSSEServer
    made: list[Provider] = field(default_factory=list)

    def provider(
        self,
        name: str = "main",
        *,
        api_key: str | None = KEY,
        timeout: float = 5.0,
        max_retries: int = 0,
        max_tokens: int = 256,
    ) -> OpenAIProvider | AnthropicProvider:
        cls = OpenAIProvider if self.kind == "openai" else AnthropicProvider
        provider = cls(
            name,
            model=f"{self.kind}-fake-model",
            api_key=api_key,
            base_url=self.fake.base_url,
            timeout=timeout,
            max_retries=max_retries,
            max_tokens=max_tokens,
        )
        self.made.append(provider)
        return provider

    async def aclose(self) -> None:
        for provider in self.made:
            await provider.aclose()


def make_fake(kind: str) -> FakeSSEServer:
    return FakeOpenAI(default_text=TEXT) if kind == "openai" else FakeAnthropic(default_text=TEXT)


async def _backend(kind: str) -> AsyncIterator[Backend]:
    async with make_fake(kind) as fake:
        backend = Backend(kind, fake)
        yield backend
        await backend.aclose()


@pytest.fixture(params=["openai", "anthropic"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    """Each test using this runs once against each API."""
    async for value in _backend(request.param):
        yield value


@pytest.fixture
async def openai_backend() -> AsyncIterator[Backend]:
    async for value in _backend("openai"):
        yield value


@pytest.fixture
async def anthropic_backend() -> AsyncIterator[Backend]:
    async for value in _backend("anthropic"):
        yield value
