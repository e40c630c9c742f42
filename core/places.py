"""Scopes: the settings in force where a message was sent, resolved once per message.

A platform adapter knows where a message came from and hands core the place
as a chain of scope IDs, most specific first (`IncomingMessage.place`, e.g.
`("discord:THREAD", "discord:CHANNEL", "discord:guild:G", "discord")`). The
`ScopeResolver` merges the configured scopes on that chain key by key over
the top-level values: a channel that sets only `model` keeps its server's
`system_prompt`. A scope's `provider` brings that entry's own model unless
the same or a more specific scope sets `model`. Every consumer (prompt,
provider, sessions, bridging, mention rule, `/status`, metrics) reads the
resulting `PlaceSettings`, never the raw config, and core never branches on
a platform: the chain is plain data.

The resolver knows no key by name except `provider`/`model` (they pick the
provider chain) and `require_mention`: every other key is carried through,
and one named like an `EngineSettings` field replaces that field. So a new
per-scope key is one config field.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from chatbridge.core.models import IncomingMessage
from chatbridge.core.ports import Provider
from chatbridge.core.settings import EngineSettings

__all__ = [
    "DEFAULT_SCOPE",
    "PlaceSettings",
    "ProviderChains",
    "ScopeResolver",
    "SessionModels",
    "chain_of",
]

DEFAULT_SCOPE = "default"
"""The metrics label of a message no configured scope matched."""

ProviderChains = Callable[[str, str], Provider]
"""`(provider entry, model) -> the chain to ask`: that entry with that model,
then `providers.fallback`. Built by the composition root."""

_ENGINE_FIELDS = frozenset(f.name for f in dataclasses.fields(EngineSettings))


def chain_of(message: IncomingMessage) -> tuple[str, ...]:
    """The message's place; a message without one (the console, an inbox row
    from before scopes) is in its chat and its platform."""
    if message.place:
        return message.place
    conversation = message.conversation
    return (conversation.chat_id, conversation.platform)


@dataclass(frozen=True, slots=True)
class PlaceSettings:
    """The settings in force in one place.

    `settings` are the engine's settings with the place's prompt, language,
    TTLs and bridging; `provider` the chain to ask. `scope` is the most
    specific configured scope that matched, or "" for none. `values` holds
    every per-scope key's value in force and `sources` where each came from
    (a scope ID or a config section path), for `config explain`.
    """

    settings: EngineSettings
    provider: Provider
    provider_name: str
    model: str
    require_mention: bool
    scope: str = ""
    values: Mapping[str, object] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def metric_scope(self) -> str:
        """The scope as a metrics label: a configured ID or `default` (bounded)."""
        return self.scope or DEFAULT_SCOPE

    @property
    def model_label(self) -> str:
        """`gpt-5.4 (backup)`, as `/status` shows it."""
        return f"{self.model} ({self.provider_name})" if self.provider_name else self.model

    @property
    def fingerprint(self) -> str:
        """What a session was answered with; a change (by reload) starts a new one."""
        return f"{self.provider_name}\0{self.model}"


class ScopeResolver:
    """Merges configured scopes over the top-level values, per place chain.

    `scopes` maps a scope ID to the keys it sets; `defaults` maps every key to
    its top-level (value, source); `models` maps each provider entry to its
    own model. Results are cached per combination of matching scopes, so a
    message costs a few dict lookups however many scopes are configured.
    """

    def __init__(
        self,
        *,
        base: EngineSettings,
        provider: Provider,
        defaults: Mapping[str, tuple[object, str]] | None = None,
        scopes: Mapping[str, Mapping[str, object]] | None = None,
        models: Mapping[str, str] | None = None,
        chains: ProviderChains | None = None,
    ) -> None:
        self._base = base
        self._provider = provider
        self._defaults = dict(defaults or {})
        self._defaults.setdefault("provider", (provider.name, "providers.default"))
        self._defaults.setdefault("model", (provider.model, "providers.default"))
        self._defaults.setdefault("require_mention", (True, "default"))
        self._scopes = {key: dict(values) for key, values in (scopes or {}).items()}
        self._models = dict(models or {})
        self._chains = chains
        self._cache: dict[tuple[str, ...], PlaceSettings] = {}

    @property
    def scope_ids(self) -> tuple[str, ...]:
        return tuple(self._scopes)

    def resolve(self, chain: tuple[str, ...]) -> PlaceSettings:
        """The settings in force for a place, most specific first in `chain`."""
        scopes = self._scopes
        matched = tuple(scope for scope in chain if scope in scopes) if scopes else ()
        found = self._cache.get(matched)
        if found is None:
            found = self._cache[matched] = self._build(matched)
        return found

    def for_message(self, message: IncomingMessage) -> PlaceSettings:
        return self.resolve(chain_of(message))

    def requires_mention(self, chain: tuple[str, ...]) -> bool:
        """The `MentionRule` adapters ask before a group message reaches the inbox."""
        return self.resolve(chain).require_mention

    def _build(self, matched: tuple[str, ...]) -> PlaceSettings:
        values = {key: value for key, (value, _) in self._defaults.items()}
        sources = {key: source for key, (_, source) in self._defaults.items()}
        for scope_id in reversed(matched):  # least specific first; later wins
            scope = self._scopes[scope_id]
            for key, value in scope.items():
                values[key], sources[key] = value, scope_id
            if "provider" in scope and "model" not in scope:
                name = str(scope["provider"])
                values["model"] = self._models.get(name, "")
                sources["model"] = f"providers.{name}.model"
        name, model = str(values["provider"]), str(values["model"])
        engine: dict[str, Any] = {k: v for k, v in values.items() if k in _ENGINE_FIELDS}
        settings = dataclasses.replace(self._base, **engine) if engine else self._base
        default = self._defaults["provider"][0], self._defaults["model"][0]
        if self._chains is None or (name, model) == default:
            provider = self._provider
        else:
            provider = self._chains(name, model)
        return PlaceSettings(
            settings=settings,
            provider=provider,
            provider_name=name,
            model=model,
            require_mention=bool(values["require_mention"]),
            scope=matched[0] if matched else "",
            values=MappingProxyType(values),
            sources=MappingProxyType(sources),
        )


class SessionModels:
    """Which provider and model each live session was last answered with, so a
    session whose provider or model a reload changed starts afresh (and
    bridges). In memory and bounded: after a restart every session counts as
    unchanged."""

    def __init__(self, limit: int = 50_000) -> None:
        self._seen: OrderedDict[str, str] = OrderedDict()
        self._limit = limit

    def changed(self, conversation_key: str, fingerprint: str) -> bool:
        seen = self._seen.get(conversation_key)
        return seen is not None and seen != fingerprint

    def remember(self, conversation_key: str, fingerprint: str) -> None:
        self._seen.pop(conversation_key, None)
        self._seen[conversation_key] = fingerprint
        while len(self._seen) > self._limit:
            self._seen.popitem(last=False)
