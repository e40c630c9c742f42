"""Stopping a consumer mid-answer must hang up the HTTP stream, not leave it running."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from chatbridge.providers.base import Prompt, Provider, StreamEvent, TextDelta
from chatbridge.providers.fallback import FallbackProvider
from tests.providers.conftest import PROMPT, Backend
from tests.support.sse import Reply

# Long and slow enough that the stream is certainly still open when we stop.
SLOW = Reply(text="word " * 200, chunk_chars=5, chunk_delay=0.02)


class Spy:
    """Wraps a provider and holds on to every stream it hands out."""

    def __init__(self, inner: Provider) -> None:
        self.inner, self.name, self.model = inner, inner.name, inner.model
        self.label = inner.label
        self.handed_out: list[AsyncIterator[StreamEvent]] = []

    def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        self.handed_out.append(self.inner.stream(prompt))
        return self.handed_out[-1]

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _consume(provider: Provider, first: asyncio.Event) -> None:
    async for event in provider.stream(PROMPT):
        if isinstance(event, TextDelta):
            first.set()


async def _cancel_mid_stream(backend: Backend, provider: Provider) -> None:
    backend.fake.script(SLOW)
    first = asyncio.Event()
    task = asyncio.create_task(_consume(provider, first))
    await asyncio.wait_for(first.wait(), 30)
    assert backend.fake.open_streams == 1
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    assert await backend.fake.wait_idle()
    assert backend.fake.streams.closed_by_client == 1
    assert backend.fake.streams.completed == 0


async def test_cancelling_the_consumer_closes_the_stream(backend: Backend) -> None:
    await _cancel_mid_stream(backend, backend.provider())


async def test_cancelling_through_fallback_closes_the_stream(backend: Backend) -> None:
    chain = FallbackProvider([backend.provider(), backend.provider("backup")])
    await _cancel_mid_stream(backend, chain)
    assert len(backend.fake.requests) == 1  # cancellation is not a reason to fall back


@pytest.mark.parametrize("through_fallback", [False, True], ids=["direct", "fallback"])
async def test_closing_the_generator_early_closes_the_stream(
    backend: Backend, through_fallback: bool
) -> None:
    backend.fake.script(SLOW)
    provider: Provider = backend.provider()
    if through_fallback:
        # The spy keeps the inner generator alive, so only an explicit close
        # (not the garbage collector) can end that stream in time.
        provider = FallbackProvider([Spy(provider), backend.provider("backup")])
    events = provider.stream(PROMPT)
    assert isinstance(await anext(events), TextDelta)
    await events.aclose()  # type: ignore[attr-defined]
    assert await backend.fake.wait_idle()
    assert backend.fake.streams.closed_by_client == 1


async def test_provider_is_reusable_after_a_cancelled_stream(backend: Backend) -> None:
    provider = backend.provider()
    await _cancel_mid_stream(backend, provider)
    answer = [e.text async for e in provider.stream(PROMPT) if isinstance(e, TextDelta)]
    assert "".join(answer) == backend.fake.default_text
