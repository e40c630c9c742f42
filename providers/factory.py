"""Config entries to providers: one instance (one SDK client) per entry.

The config objects are duck-typed so this module needs nothing from `config`:
an entry has `type`, `model`, `api_key`, `base_url`, `timeout`, `max_retries`
and `max_tokens`; the providers section has `default`, `fallback`, `entries`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from chatbridge.providers._wire import media_accepted
from chatbridge.providers.base import Provider
from chatbridge.providers.debug import DebugProvider
from chatbridge.providers.deferred import DeferredProvider
from chatbridge.providers.fallback import FallbackProvider


class ProvidersSection(Protocol):
    @property
    def default(self) -> str | None: ...

    @property
    def fallback(self) -> Sequence[str]: ...

    @property
    def entries(self) -> Mapping[str, Any]: ...


def _secret(value: object) -> str | None:
    """A plain key from a pydantic `SecretStr`, a plain string, or None."""
    if value is None:
        return None
    reveal = getattr(value, "get_secret_value", None)
    key = reveal() if callable(reveal) else value
    if not isinstance(key, str):
        raise TypeError("a provider's api_key must be a string or a SecretStr")
    return key or None


SDK_MODULES = {
    "openai": "chatbridge.providers.openai",
    "anthropic": "chatbridge.providers.anthropic",
}


def build_provider(name: str, cfg: Any) -> Provider:
    """The provider for config entry `name`, its SDK not imported yet.

    SDKs are imported on first use or by `warm` (`anthropic` alone takes
    seconds to import, `openai` ~0.7 s; start-up should not wait for them).
    Raises ValueError for an unknown `type`. `base_url=None` means the SDK's default.
    """
    kind = cfg.type
    if kind == "debug":
        return DebugProvider(name)
    if kind not in SDK_MODULES:
        raise ValueError(f"provider {name!r} has unknown type {kind!r}")
    return DeferredProvider(
        name,
        model=cfg.model,
        module=SDK_MODULES[kind],
        build=lambda: build_now(name, cfg),
        accepts=media_accepted(kind, vision=_vision(cfg), base_url=cfg.base_url or None),
    )


def _vision(cfg: Any) -> bool:
    return bool(getattr(cfg, "vision", True))


def build_now(name: str, cfg: Any) -> Provider:
    """The real SDK-backed provider for config entry `name` (imports its SDK)."""
    provider_class: type[Provider]
    if cfg.type == "openai":
        from chatbridge.providers.openai import OpenAIProvider as provider_class
    else:
        from chatbridge.providers.anthropic import AnthropicProvider as provider_class
    return provider_class(  # type: ignore[call-arg]
        name,
        model=cfg.model,
        api_key=_secret(cfg.api_key),
        base_url=cfg.base_url or None,
        timeout=float(cfg.timeout),
        max_retries=int(cfg.max_retries),
        max_tokens=int(cfg.max_tokens),
        vision=_vision(cfg),
    )


async def warm(provider: Provider) -> None:
    """Import the SDKs a provider (or every provider of a chain) will need."""
    members = provider.providers if isinstance(provider, FallbackProvider) else (provider,)
    for member in members:
        if isinstance(member, DeferredProvider):
            await member.warm()


def build_chain(providers_cfg: ProvidersSection) -> Provider:
    """`default` followed by `fallback` (duplicates dropped, order kept).

    One name gives that provider itself; several give a `FallbackProvider` that
    owns them. Raises ValueError naming any entry that doesn't exist.
    """
    if not providers_cfg.default:
        raise ValueError("providers.default is not set")
    names = list(dict.fromkeys([providers_cfg.default, *providers_cfg.fallback]))
    missing = [name for name in names if name not in providers_cfg.entries]
    if missing:
        raise ValueError(f"unknown provider entries: {', '.join(map(repr, missing))}")
    chain = [build_provider(name, providers_cfg.entries[name]) for name in names]
    if len(chain) == 1:
        return chain[0]
    # The chain takes what its first entry takes; a later one that cannot sees
    # placeholders (its provider drops the parts it cannot send).
    return FallbackProvider(chain, logger=logging.getLogger("chatbridge.providers"))
