"""Config entries to providers and chains (duck-typed config objects)."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
from pydantic import SecretStr

from chatbridge.providers.anthropic import AnthropicProvider
from chatbridge.providers.debug import DebugProvider
from chatbridge.providers.deferred import DeferredProvider
from chatbridge.providers.factory import build_chain, build_provider
from chatbridge.providers.fallback import FallbackProvider
from chatbridge.providers.openai import OpenAIProvider
from tests.providers.conftest import PROMPT, TEXT, Backend, collect
from tests.support.closing import Closing


def entry(kind: str, **overrides: object) -> SimpleNamespace:
    values: dict[str, object] = {
        "type": kind,
        "model": f"{kind}-model",
        "api_key": None,
        "base_url": None,
        "timeout": 5.0,
        "max_retries": 0,
        "max_tokens": 64,
    }
    return SimpleNamespace(**(values | overrides))


async def test_built_provider_uses_the_secret_key_and_base_url(backend: Backend) -> None:
    cfg = entry(backend.kind, api_key=SecretStr("sk-from-config"), base_url=backend.fake.base_url)
    provider = build_provider("main", cfg)
    backend.made.append(provider)
    assert isinstance(provider, DeferredProvider)
    assert provider.built is None, "the SDK client was made before it was needed"
    assert (provider.name, provider.model) == ("main", f"{backend.kind}-model")
    assert (await collect(provider)).text == TEXT
    real = OpenAIProvider if backend.kind == "openai" else AnthropicProvider
    assert isinstance(provider.built, real)
    headers = backend.fake.requests[0].headers
    sent = headers.get("x-api-key") or headers["authorization"].removeprefix("Bearer ")
    assert sent == "sk-from-config"
    assert backend.fake.requests[0].body["max_tokens"] == 64


async def test_debug_entry_needs_no_key_or_network() -> None:
    provider = build_provider("dbg", entry("debug"))
    assert isinstance(provider, DebugProvider)
    assert provider.name == "dbg"
    assert "Say hello" in (await collect(provider, PROMPT)).text


def test_unknown_type_is_refused() -> None:
    with pytest.raises(ValueError, match="'gemini'"):
        build_provider("main", entry("gemini"))


def test_a_single_entry_chain_is_the_provider_itself() -> None:
    section = SimpleNamespace(default="dbg", fallback=[], entries={"dbg": entry("debug")})
    assert isinstance(build_chain(section), DebugProvider)


async def test_chain_is_default_then_fallbacks_without_duplicates(closing: Closing) -> None:
    section = SimpleNamespace(
        default="a",
        fallback=["b", "a", "c"],
        entries={"a": entry("openai"), "b": entry("anthropic"), "c": entry("debug")},
    )
    provider = closing(build_chain(section))
    assert isinstance(provider, FallbackProvider)
    assert [p.name for p in provider.providers] == ["a", "b", "c"]
    assert (provider.name, provider.model) == ("a", "openai-model")


def test_chain_naming_a_missing_entry_is_refused() -> None:
    section = SimpleNamespace(default="a", fallback=["ghost"], entries={"a": entry("debug")})
    with pytest.raises(ValueError, match="'ghost'"):
        build_chain(section)


def test_building_a_provider_imports_no_sdk_until_warmed() -> None:
    code = (
        "import sys, asyncio\n"
        "from types import SimpleNamespace as N\n"
        "from chatbridge.providers.factory import build_provider, warm\n"
        "cfg = N(type='openai', model='m', api_key=None, base_url='http://127.0.0.1:9/v1',"
        " timeout=5.0, max_retries=0, max_tokens=8)\n"
        "p = build_provider('main', cfg)\n"
        "before = 'openai' in sys.modules\n"
        "asyncio.run(warm(p))\n"
        "print(before, 'openai' in sys.modules, type(p.built).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "OpenAIProvider"]
