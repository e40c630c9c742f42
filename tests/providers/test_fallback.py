"""The fallback chain: real providers on both fakes, plus stubs for the edge cases."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from chatbridge.providers.base import (
    InvalidRequest,
    Prompt,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    StreamEvent,
    TextDelta,
)
from chatbridge.providers.fallback import FallbackProvider
from tests.providers.conftest import TEXT, Backend, collect
from tests.support.sse import Fault, Reply

LOGGER = "tests.fallback"


@pytest.fixture
def caplog_info(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger=LOGGER)
    return caplog


def chain(*providers: object) -> FallbackProvider:
    return FallbackProvider(providers, logger=logging.getLogger(LOGGER))  # type: ignore[arg-type]


async def test_backup_answers_when_default_fails_before_text(
    openai_backend: Backend, anthropic_backend: Backend, caplog_info: pytest.LogCaptureFixture
) -> None:
    openai_backend.fake.script(Fault.server_error(503))
    anthropic_backend.fake.script(Reply(text="from the backup"))
    both = chain(openai_backend.provider("main"), anthropic_backend.provider("backup"))
    assert (both.name, both.model) == ("main", "openai-fake-model")
    outcome = await collect(both)
    assert outcome.error is None
    assert outcome.text == "from the backup"
    assert outcome.usage is not None
    assert len(openai_backend.fake.requests) == 1
    assert len(anthropic_backend.fake.requests) == 1
    warnings = [r for r in caplog_info.records if r.levelno == logging.WARNING]
    infos = [r for r in caplog_info.records if r.levelno == logging.INFO]
    assert len(warnings) == 1
    assert "'main'" in warnings[0].getMessage()
    assert "ProviderUnavailable" in warnings[0].getMessage()
    assert "'backup'" in warnings[0].getMessage()  # says what it tries next
    assert len(infos) == 1
    assert "'backup' answered" in infos[0].getMessage()


async def test_error_after_text_propagates_and_backup_is_not_called(
    openai_backend: Backend, anthropic_backend: Backend
) -> None:
    openai_backend.fake.script(Fault.drop_mid_stream(after_chunks=2))
    both = chain(openai_backend.provider("main"), anthropic_backend.provider("backup"))
    outcome = await collect(both)
    assert outcome.text == TEXT[:8]
    assert isinstance(outcome.error, ProviderUnavailable)
    assert outcome.error.provider == "main"
    assert anthropic_backend.fake.requests == []


async def test_all_failing_names_every_provider_and_keeps_the_last_class(
    openai_backend: Backend, anthropic_backend: Backend
) -> None:
    openai_backend.fake.script(Fault.server_error(500))
    anthropic_backend.fake.script(Fault.rate_limit(retry_after=7))
    both = chain(openai_backend.provider("main"), anthropic_backend.provider("backup"))
    outcome = await collect(both)
    error = outcome.error
    assert type(error) is RateLimited
    assert error.retry_after == 7
    assert error.provider == "backup"
    assert "All providers failed" in str(error)
    assert "'main'" in str(error)
    assert "'backup'" in str(error)
    assert isinstance(error.__cause__, RateLimited)
    assert error.__cause__.provider == "backup"


class Stub:
    """A provider that yields `texts`, then raises `error` (if any)."""

    def __init__(self, name: str, texts: list[str], error: ProviderError | None = None) -> None:
        self.name, self.model, self.label = name, f"{name}-model", name
        self.texts, self.error = texts, error
        self.calls = 0
        self.closed = False

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        for text in self.texts:
            yield TextDelta(text)
        if self.error is not None:
            raise self.error

    async def aclose(self) -> None:
        self.closed = True


async def test_first_success_stops_the_chain() -> None:
    a, b = Stub("a", ["x"]), Stub("b", ["y"])
    assert (await collect(chain(a, b))).text == "x"
    assert (a.calls, b.calls) == (1, 0)


async def test_empty_deltas_do_not_count_as_text() -> None:
    a = Stub("a", [""], ProviderUnavailable("a broke", provider="a"))
    b = Stub("b", ["y"])
    outcome = await collect(chain(a, b))
    assert outcome.text == "y"
    assert b.calls == 1


async def test_three_failures_report_all_in_order_with_the_last_class() -> None:
    stubs = [
        Stub("a", [], RateLimited("a", provider="a", retry_after=1)),
        Stub("b", [], ProviderUnavailable("b", provider="b")),
        Stub("c", [], InvalidRequest("c", provider="c")),
    ]
    error = (await collect(chain(*stubs))).error
    assert type(error) is InvalidRequest
    assert error.provider == "c"
    assert str(error) == (
        "All providers failed: 'a' (RateLimited), 'b' (ProviderUnavailable), 'c' (InvalidRequest)."
    )


async def test_non_provider_errors_are_bugs_and_not_swallowed() -> None:
    class Broken(Stub):
        async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
            raise RuntimeError("bug")
            yield TextDelta("")  # pragma: no cover - makes this an async generator

    b = Stub("b", ["y"])
    with pytest.raises(RuntimeError, match="bug"):
        await collect(chain(Broken("a", []), b))
    assert b.calls == 0


async def test_aclose_closes_every_provider() -> None:
    a, b = Stub("a", []), Stub("b", [])
    await chain(a, b).aclose()
    assert a.closed
    assert b.closed


def test_an_empty_chain_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        FallbackProvider([])
