"""Both providers against their fakes: streaming, every fault, the error mapping."""

from __future__ import annotations

import pytest

from chatbridge.core.models import Usage
from chatbridge.providers.base import (
    ProviderMisconfigured,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from tests.providers.conftest import KEY, PROMPT_WORDS, TEXT, Backend, Outcome, collect
from tests.support.sse import Fault, Reply


def assert_error(outcome: Outcome, cls: type[Exception]) -> None:
    """The error is exactly `cls`, names the entry, is one line, and hides the key."""
    assert type(outcome.error) is cls, f"expected {cls.__name__}, got {outcome.error!r}"
    message = str(outcome.error)
    # A misconfiguration names the entry by its config key path, for the admin.
    assert ("providers.main" if cls is ProviderMisconfigured else "'main'") in message
    assert outcome.error.provider == "main"
    assert "\n" not in message
    assert message.endswith(".")
    assert KEY not in message
    assert KEY not in repr(outcome.error)


async def test_deltas_arrive_in_order_and_join_to_the_text(backend: Backend) -> None:
    backend.fake.script(Reply(chunk_chars=5))
    outcome = await collect(backend.provider())
    assert outcome.error is None
    assert outcome.deltas == [TEXT[i : i + 5] for i in range(0, len(TEXT), 5)]
    assert outcome.text == TEXT
    assert outcome.usage == Usage(input_tokens=PROMPT_WORDS, output_tokens=len(outcome.deltas))


async def test_reply_can_depend_on_the_prompt(backend: Backend) -> None:
    backend.fake.script(Reply(text=lambda body: f"{len(body['messages'])} message(s) seen"))
    outcome = await collect(backend.provider())
    expected = 2 if backend.kind == "openai" else 1  # OpenAI carries the system prompt inline
    assert outcome.text == f"{expected} message(s) seen"


async def test_rate_limit_is_retried_by_the_sdk(backend: Backend) -> None:
    backend.fake.script(Fault.rate_limit(retry_after=0.01))
    outcome = await collect(backend.provider(max_retries=1))
    assert outcome.error is None
    assert outcome.text == TEXT
    assert len(backend.fake.requests) == 2


async def test_persistent_rate_limit_is_rate_limited_with_retry_after(backend: Backend) -> None:
    backend.fake.script(Fault.rate_limit(retry_after=0.01), Fault.rate_limit(retry_after=0.01))
    outcome = await collect(backend.provider(max_retries=1))
    assert_error(outcome, RateLimited)
    assert isinstance(outcome.error, RateLimited)
    assert outcome.error.retry_after == 0.01
    assert len(backend.fake.requests) == 2


@pytest.mark.parametrize("fault", [Fault.server_error(500, 0.01), Fault.overloaded(0.01)])
async def test_server_errors_are_retried_then_unavailable(backend: Backend, fault: Fault) -> None:
    backend.fake.script(fault, fault)
    outcome = await collect(backend.provider(max_retries=1))
    assert_error(outcome, ProviderUnavailable)
    assert f"HTTP {fault.status}" in str(outcome.error)
    assert len(backend.fake.requests) == 2


async def test_server_error_then_success_answers(backend: Backend) -> None:
    backend.fake.script(Fault.overloaded(0.01))
    outcome = await collect(backend.provider(max_retries=1))
    assert outcome.text == TEXT
    assert len(backend.fake.requests) == 2


async def test_slow_first_byte_times_out(backend: Backend) -> None:
    backend.fake.script(Fault.slow_first_byte(2.0))
    outcome = await collect(backend.provider(timeout=0.2))
    assert_error(outcome, ProviderTimeout)


async def test_stall_mid_stream_times_out(backend: Backend) -> None:
    # 0.6 s leaves room for the first chunk on a loaded CI machine; the stall is 3 s.
    backend.fake.script(Reply(chunk_delay=3.0))
    outcome = await collect(backend.provider(timeout=0.6))
    assert outcome.deltas == [TEXT[:4]]
    assert_error(outcome, ProviderTimeout)


@pytest.mark.parametrize(
    "fault",
    [Fault.drop_mid_stream(2), Fault.malformed(2), Fault.truncated(2), Fault.stream_error(2)],
    ids=["dropped", "malformed", "truncated", "error-event"],
)
async def test_broken_streams_are_unavailable(backend: Backend, fault: Fault) -> None:
    backend.fake.script(fault)
    outcome = await collect(backend.provider(max_retries=2))
    assert outcome.deltas == [TEXT[:4], TEXT[4:8]]  # what came before the break
    assert_error(outcome, ProviderUnavailable)
    assert len(backend.fake.requests) == 1  # a started stream is never replayed


async def test_wrong_key_is_misconfigured_without_the_key(backend: Backend) -> None:
    backend.fake.api_key = "the-right-key"  # the fake's 401 echoes the key it got
    outcome = await collect(backend.provider(max_retries=2))
    assert_error(outcome, ProviderMisconfigured)
    assert "HTTP 401" in str(outcome.error)
    assert len(backend.fake.requests) == 1  # 4xx is not retried


async def test_bad_request_shows_the_server_reason_with_the_key_masked(backend: Backend) -> None:
    reason = f"max_tokens too large for key {KEY}"
    backend.fake.script(Fault.status_error(400, "invalid_request_error", reason))
    outcome = await collect(backend.provider())
    assert_error(outcome, ProviderMisconfigured)
    assert "max_tokens too large for key ***" in str(outcome.error)


async def test_connection_refused_is_unavailable(backend: Backend) -> None:
    provider = backend.provider()
    await backend.fake.__aexit__(None, None, None)  # nothing listens on the port now
    outcome = await collect(provider)
    assert_error(outcome, ProviderUnavailable)
