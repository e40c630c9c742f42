"""Config -> `ScopeResolver`: the top-level values with their sources, the
configured scopes, and the provider chains scopes ask for.

A scope's `provider`/`model` pair gets its own chain: that entry with that
model first, then `providers.fallback` (each with its own model), built on
first use and kept for the config's lifetime (`ProviderPool`). The default
pair is the engine's own provider.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from chatbridge.config import ChatbridgeConfig, ScopeSettings, top_level_of
from chatbridge.core.places import ScopeResolver
from chatbridge.core.settings import EngineSettings
from chatbridge.providers.base import Provider
from chatbridge.providers.factory import build_provider
from chatbridge.providers.fallback import FallbackProvider

__all__ = ["ProviderPool", "defaults_of", "resolver_from_config"]

log = logging.getLogger(__name__)

BUILT_IN = "built-in default"


class ProviderPool:
    """Provider chains for (entry, model) pairs other than the default; owns them."""

    def __init__(self, config: ChatbridgeConfig) -> None:
        self._providers = config.providers
        self._members: dict[tuple[str, str], Provider] = {}
        self._chains: dict[tuple[str, str], Provider] = {}

    def chain(self, name: str, model: str) -> Provider:
        """`name` answering with `model`, then the fallback entries."""
        found = self._chains.get((name, model))
        if found is None:
            entries = self._providers.entries
            names = [name, *(f for f in self._providers.fallback if f != name)]
            members = [self._member(n, model if n == name else entries[n].model) for n in names]
            found = (
                members[0]
                if len(members) == 1
                else FallbackProvider(members, logger=logging.getLogger("chatbridge.providers"))
            )
            self._chains[(name, model)] = found
        return found

    def _member(self, name: str, model: str) -> Provider:
        found = self._members.get((name, model))
        if found is None:
            entry = self._providers.entries[name]
            found = build_provider(name, entry.model_copy(update={"model": model}))
            self._members[(name, model)] = found
        return found

    async def aclose(self) -> None:
        for provider in self._members.values():
            with contextlib.suppress(Exception):
                await provider.aclose()
        self._members.clear()
        self._chains.clear()


def _at(config: ChatbridgeConfig, dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def defaults_of(config: ChatbridgeConfig, provider: Provider) -> dict[str, tuple[object, str]]:
    """Every per-scope key's top-level value and the section it comes from."""
    providers = config.providers
    defaults: dict[str, tuple[object, str]] = {}
    for key in ScopeSettings.model_fields:
        marker = top_level_of(key)
        if key == "provider":
            if providers.default:
                defaults[key] = (providers.default, "providers.default")
            else:
                defaults[key] = (provider.name, BUILT_IN)
        elif key == "model":
            if providers.default:
                entry = providers.entries[providers.default]
                defaults[key] = (entry.model, f"providers.{providers.default}.model")
            else:
                defaults[key] = (provider.model, BUILT_IN)
        elif marker.path is None:
            defaults[key] = (marker.default, BUILT_IN)
        else:
            defaults[key] = (_at(config, marker.path), marker.path)
    return defaults


def resolver_from_config(
    config: ChatbridgeConfig, *, settings: EngineSettings, provider: Provider
) -> tuple[ScopeResolver, ProviderPool]:
    """The resolver for `config`, and the pool holding its extra providers
    (the caller closes it after the engine is done with it)."""
    pool = ProviderPool(config)
    resolver = ScopeResolver(
        base=settings,
        provider=provider,
        defaults=defaults_of(config, provider),
        scopes={
            scope_id: scope.model_dump(exclude_none=True)
            for scope_id, scope in config.scopes.items()
        },
        models={name: entry.model for name, entry in config.providers.entries.items()},
        chains=pool.chain,
    )
    return resolver, pool
