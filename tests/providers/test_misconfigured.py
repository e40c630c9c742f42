"""Honest provider errors: a config problem says so (user and admin), the rest say "try again".

Real SDKs against the fakes, through the real engine, so the user's sentence,
the admin's log line and the empty ring are what a deployment would show.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from chatbridge.core.engine import EngineSettings
from chatbridge.providers.base import (
    InvalidRequest,
    Prompt,
    Provider,
    ProviderError,
    ProviderMisconfigured,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    StreamEvent,
    TextDelta,
)
from chatbridge.providers.fallback import FallbackProvider
from tests.providers.conftest import KEY, TEXT, Backend, collect
from tests.support.sse import Fault, Reply, Step
from tests.support.testbot import ALICE, TestBot, TestBots


@dataclass(frozen=True, slots=True)
class Misconfiguration:
    """A fault only the admin can fix, and what the admin's log line must say."""

    id: str
    fault: Step | None  # None: the fake demands another key and answers 401 itself
    reason: str
    fix: str  # the admin line's tail: "...; check <fix>."
    what: str  # the admin line's head after "providers.main: "

    def arm(self, backend: Backend) -> None:
        if self.fault is None:
            backend.fake.api_key = "the-right-key"  # the fake's 401 echoes the key it got
        else:
            backend.fake.script(self.fault)


def _unknown_model(kind: str) -> Fault:
    model = f"{kind}-fake-model"
    if kind == "openai":
        message = f"The model `{model}` does not exist or you do not have access to it."
        return Fault.status_error(404, "invalid_request_error", message)
    return Fault.status_error(404, "not_found_error", f"model: {model}")


MISCONFIGURATIONS = [
    Misconfiguration(
        "401", None, "auth", "providers.main.api_key", "the API key was rejected (HTTP 401"
    ),
    Misconfiguration(
        "403",
        Fault.status_error(403, "permission_error", f"key {KEY} may not use this model"),
        "permission",
        "providers.main.api_key (its account, plan and access to model '{kind}-fake-model')",
        "the API key is not allowed to do this (HTTP 403",
    ),
    Misconfiguration(
        "404-model",
        None,  # replaced per API in the fixture below: the bodies differ
        "model",
        "providers.main.model",
        "model '{kind}-fake-model' not found (HTTP 404",
    ),
    Misconfiguration(
        "400",
        Fault.status_error(400, "invalid_request_error", f"max_tokens: too large for {KEY}"),
        "request",
        "providers.main.model and providers.main.max_tokens",
        'the request was rejected (HTTP 400 invalid_request_error: "max_tokens: too large for ***"',
    ),
]


def _armed(case: Misconfiguration, backend: Backend) -> Misconfiguration:
    """The case with `{kind}` filled in and the unknown-model body of this API."""
    fault = _unknown_model(backend.kind) if case.id == "404-model" else case.fault
    kind = backend.kind
    return Misconfiguration(
        case.id, fault, case.reason, case.fix.format(kind=kind), case.what.format(kind=kind)
    )


def _no_secret_and_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert KEY not in caplog.text
    assert "the-right-key" not in caplog.text
    assert "Traceback" not in caplog.text
    assert all(record.exc_info is None for record in caplog.records)


async def _bot(testbot: TestBots, provider: Provider, language: str) -> TestBot:
    return await testbot(
        provider=provider,  # type: ignore[arg-type]
        settings=EngineSettings(language=language),
    )


async def _nothing_remembered(bot: TestBot) -> None:
    store = bot.engine.store
    assert await store.ring(f"telegram:{ALICE}", since=0.0) == []
    assert await store.load_session(f"telegram:{ALICE}") is None


# --- the provider's error ---------------------------------------------------


@pytest.mark.parametrize("case", MISCONFIGURATIONS, ids=lambda case: case.id)
async def test_config_faults_are_misconfigured_with_the_key_path_to_fix(
    backend: Backend, case: Misconfiguration
) -> None:
    case = _armed(case, backend)
    case.arm(backend)
    outcome = await collect(backend.provider(max_retries=2))
    error = outcome.error
    assert isinstance(error, ProviderMisconfigured), repr(error)
    assert isinstance(error, InvalidRequest)  # still in the tree where it was
    assert (error.reason, error.provider) == (case.reason, "main")
    assert error.setting == case.fix.split(" ")[0]
    assert str(error).startswith(f"providers.main: {case.what}")
    assert str(error).endswith(f"; check {case.fix}.")
    assert KEY not in str(error)
    assert "the-right-key" not in str(error)
    assert len(backend.fake.requests) == 1  # a config problem is not retried


async def test_a_404_that_names_no_model_points_at_the_base_url(backend: Backend) -> None:
    backend.fake.script(Fault.status_error(404, "not_found_error", "Not Found"))
    error = (await collect(backend.provider())).error
    assert isinstance(error, ProviderMisconfigured)
    assert (error.reason, error.setting) == ("endpoint", "providers.main.base_url")
    assert str(error).endswith("; check providers.main.base_url.")


@pytest.mark.parametrize(
    ("fault", "cls"),
    [
        (Fault.status_error(408, "timeout_error", "Request timed out"), ProviderTimeout),
        (Fault.status_error(409, "conflict_error", "Conflict"), ProviderUnavailable),
    ],
    ids=["408", "409"],
)
async def test_408_and_409_stay_transient(backend: Backend, fault: Fault, cls: type) -> None:
    backend.fake.script(fault)
    assert type((await collect(backend.provider())).error) is cls


# --- what the user and the admin are told ------------------------------------

# The sentences as users must read them, written out here (not taken from
# core/texts.py, which is what is under test).
MISCONFIGURED = {
    "en": "Sorry, I cannot answer: the AI service (main) is not set up correctly, "
    "and only the admin can fix that in the chatbridge config.",
    "de": "Ich kann leider nicht antworten: Der KI-Dienst (main) ist falsch eingerichtet, "
    "und nur der Admin kann das in der chatbridge-Konfiguration beheben.",
}
TRY_AGAIN = {
    "en": "Sorry, the AI service (main) is not answering right now. "
    "Please try again in a few minutes.",
    "de": "Der KI-Dienst (main) antwortet gerade nicht. "
    "Bitte versuch es in ein paar Minuten noch einmal.",
}


@pytest.mark.parametrize("language", ["de", "en"])
@pytest.mark.parametrize("case", MISCONFIGURATIONS, ids=lambda case: case.id)
async def test_user_hears_config_problem_and_admin_log_names_the_fix(
    backend: Backend,
    case: Misconfiguration,
    language: str,
    testbot: TestBots,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    case = _armed(case, backend)
    case.arm(backend)
    bot = await _bot(testbot, backend.provider(), language)

    reply = await bot.say("Wo bleibt mein Paket?")

    assert reply == MISCONFIGURED[language]
    lines = [r for r in caplog.records if r.name == "chatbridge.core.answer"]
    assert len(lines) == 1
    assert lines[0].levelno == logging.ERROR
    line = lines[0].getMessage()
    assert "\n" not in line
    assert f"providers.main: {case.what}" in line
    assert f"; check {case.fix}." in line
    _no_secret_and_no_traceback(caplog)
    await _nothing_remembered(bot)


TRANSIENT = [
    pytest.param(Fault.rate_limit(retry_after=0.01), 5.0, id="429"),
    pytest.param(Fault.server_error(500), 5.0, id="500"),
    pytest.param(Fault.slow_first_byte(2.0), 0.2, id="timeout"),
]


@pytest.mark.parametrize("language", ["de", "en"])
@pytest.mark.parametrize(("fault", "provider_timeout"), TRANSIENT)
async def test_transient_faults_still_say_try_again(
    backend: Backend,
    fault: Fault,
    provider_timeout: float,
    language: str,
    testbot: TestBots,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    backend.fake.script(fault)
    bot = await _bot(testbot, backend.provider(timeout=provider_timeout), language)

    reply = await bot.say("Wo bleibt mein Paket?")

    assert reply == TRY_AGAIN[language]
    lines = [r for r in caplog.records if r.name == "chatbridge.core.answer"]
    assert [r.levelno for r in lines] == [logging.WARNING]
    assert "check providers" not in lines[0].getMessage()
    _no_secret_and_no_traceback(caplog)
    await _nothing_remembered(bot)


# --- the fallback chain -------------------------------------------------------


async def test_a_401_default_falls_back_to_a_working_backup(
    openai_backend: Backend,
    anthropic_backend: Backend,
    testbot: TestBots,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    openai_backend.fake.api_key = "the-right-key"
    anthropic_backend.fake.script(Reply())
    both = FallbackProvider(
        [openai_backend.provider("main"), anthropic_backend.provider("backup")],
        logger=logging.getLogger("tests.fallback"),
    )
    bot = await _bot(testbot, both, "de")

    assert await bot.say("Wo bleibt mein Paket?") == TEXT

    hops = [r.getMessage() for r in caplog.records if r.name == "tests.fallback"]
    assert "ProviderMisconfigured" in hops[0]
    assert "check providers.main.api_key" in hops[0]
    assert "trying 'backup'" in hops[0]
    assert "'backup' answered" in hops[1]
    assert not [r for r in caplog.records if r.name == "chatbridge.core.answer"]
    _no_secret_and_no_traceback(caplog)
    ring = await bot.engine.store.ring(f"telegram:{ALICE}", since=0.0)
    assert len(ring) == 1  # an answered exchange is remembered as usual


@pytest.mark.parametrize("language", ["de", "en"])
async def test_every_provider_misconfigured_is_a_config_problem(
    openai_backend: Backend,
    anthropic_backend: Backend,
    language: str,
    testbot: TestBots,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    openai_backend.fake.api_key = "the-right-key"
    anthropic_backend.fake.script(_unknown_model("anthropic"))
    both = FallbackProvider([openai_backend.provider("main"), anthropic_backend.provider("backup")])
    bot = await _bot(testbot, both, language)

    assert await bot.say("Hallo") == MISCONFIGURED[language].replace("(main)", "(main, backup)")

    (line,) = [r.getMessage() for r in caplog.records if r.name == "chatbridge.core.answer"]
    assert "check providers.main.api_key." in line
    assert "model 'anthropic-fake-model' not found" in line
    assert "check providers.backup.model." in line
    _no_secret_and_no_traceback(caplog)
    await _nothing_remembered(bot)


async def test_a_config_problem_and_an_outage_say_try_again(
    openai_backend: Backend, anthropic_backend: Backend, testbot: TestBots
) -> None:
    openai_backend.fake.script(Fault.server_error(503))
    anthropic_backend.fake.api_key = "the-right-key"
    both = FallbackProvider([openai_backend.provider("main"), anthropic_backend.provider("backup")])
    bot = await _bot(testbot, both, "en")
    assert await bot.say("Hello") == TRY_AGAIN["en"].replace("(main)", "(main, backup)")
    await _nothing_remembered(bot)


class Failing:
    """A provider that fails before any text with `error`."""

    def __init__(self, error: ProviderError) -> None:
        self.name = self.label = error.provider
        self.model = f"{error.provider}-model"
        self.error = error

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        raise self.error
        yield TextDelta("")  # pragma: no cover - makes this an async generator

    async def aclose(self) -> None:
        pass


def _misconfigured(name: str) -> ProviderMisconfigured:
    return ProviderMisconfigured(
        f"providers.{name}: the API key was rejected (HTTP 401); check providers.{name}.api_key.",
        provider=name,
        reason="auth",
        setting=f"providers.{name}.api_key",
    )


@pytest.mark.parametrize(
    ("errors", "cls", "provider"),
    [
        ([_misconfigured("a"), _misconfigured("b")], ProviderMisconfigured, "b"),
        ([RateLimited("a", provider="a", retry_after=3), _misconfigured("b")], RateLimited, "a"),
        ([_misconfigured("a"), ProviderTimeout("b", provider="b")], ProviderTimeout, "b"),
        (
            [ProviderUnavailable("a", provider="a"), _misconfigured("b"), _misconfigured("c")],
            ProviderUnavailable,
            "a",
        ),
    ],
    ids=["all-config", "rate-limited-then-config", "config-then-timeout", "outage-then-config"],
)
async def test_all_failed_is_config_only_if_every_provider_was(
    errors: list[ProviderError], cls: type[ProviderError], provider: str
) -> None:
    chain = FallbackProvider([Failing(error) for error in errors])
    error = (await collect(chain)).error
    assert type(error) is cls
    assert error.provider == provider
    assert error.__cause__ is next(e for e in reversed(errors) if e.provider == provider)
    if isinstance(error, RateLimited):
        assert error.retry_after == 3
    if cls is ProviderMisconfigured:
        assert str(error) == (
            "All providers are misconfigured: "
            "providers.a: the API key was rejected (HTTP 401); check providers.a.api_key. "
            "providers.b: the API key was rejected (HTTP 401); check providers.b.api_key."
        )
    else:
        assert str(error).startswith("All providers failed: 'a' (")
