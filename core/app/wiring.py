"""The one place that wires config into running parts (no singletons elsewhere)."""

from __future__ import annotations

import contextlib
import logging
import zoneinfo
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from datetime import tzinfo
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from chatbridge.config import (
    ChatbridgeConfig,
    ConfigError,
    ConfigIssue,
    LimitValues,
    ProviderConfig,
    SecretFileError,
    env_secret,
    url_secrets,
)
from chatbridge.core.access import AccessPolicy
from chatbridge.core.app.scopes import resolver_from_config
from chatbridge.core.clock import Clock, SystemClock
from chatbridge.core.engine import Engine
from chatbridge.core.ledger import Limits
from chatbridge.core.limits import DEFAULT_HOLD_TTL, LimitGate, LimitPolicy, Price, ProviderTerms
from chatbridge.core.media import MediaSettings, image_tokens
from chatbridge.core.ports import Transcriber
from chatbridge.core.ports.scheduling import ConversationScheduler
from chatbridge.core.ports.store import Store, StoreSettings
from chatbridge.core.scheduling import LocalScheduler, SharedInboxScheduler
from chatbridge.core.settings import EngineSettings
from chatbridge.providers.base import Provider
from chatbridge.providers.debug import DebugProvider
from chatbridge.providers.factory import build_chain, build_provider
from chatbridge.stores import open_store

__all__ = [
    "ProviderChoice",
    "access_from_config",
    "choose_provider",
    "engine_from_config",
    "secrets_of",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ProviderChoice:
    provider: Provider
    description: str  # for the start-up banner, e.g. "debug (no API key found)"


AUTO_MODELS = {"openai": "gpt-5.4-mini", "anthropic": "claude-sonnet-4-6"}


AUTO_KEYS = (("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY"))


def auto_key(environ: Mapping[str, str], variable: str) -> str:
    """An API key from `$VAR` or the file `$VAR_FILE` names; a bad file is a `ConfigError`."""
    try:
        return env_secret(environ, variable)
    except SecretFileError as exc:
        raise ConfigError(
            [ConfigIssue(file="environment", line=None, path=variable, message=str(exc))]
        ) from None


def choose_provider(config: ChatbridgeConfig, environ: Mapping[str, str]) -> ProviderChoice:
    """The configured chain; without one: OpenAI, then Anthropic by API key, else debug."""
    providers = config.providers
    if providers.entries:
        chain = build_chain(providers)
        names = providers.chain
        described = " -> ".join(
            f"{name} ({providers.entries[name].type} {providers.entries[name].model})"
            for name in names
        )
        return ProviderChoice(chain, described)
    for kind, variable in AUTO_KEYS:
        key = auto_key(environ, variable)
        if key:
            # The config model's own defaults (timeout, retries, max_tokens) apply.
            auto = ProviderConfig.model_validate(
                {"type": kind, "model": AUTO_MODELS[kind], "api_key": key}
            )
            provider = build_provider(kind, auto)
            return ProviderChoice(provider, f"{kind} {auto.model} (from {variable})")
    return ProviderChoice(
        DebugProvider("debug"),
        "debug: echoes the prompt (set OPENAI_API_KEY or ANTHROPIC_API_KEY for a real model)",
    )


def timezone_of(config: ChatbridgeConfig) -> tzinfo | None:
    return zoneinfo.ZoneInfo(config.bot.timezone) if config.bot.timezone else None


def settings_from_config(config: ChatbridgeConfig) -> EngineSettings:
    return EngineSettings(
        system_prompt=config.bot.system_prompt,
        language=config.bot.language,
        timezone=timezone_of(config),
        session_ttl=config.engine.session_ttl,
        session_max_turns=config.engine.session_max_turns,
        session_max_tokens=config.engine.session_max_tokens,
        cancel_on_new_message=config.engine.on_new_message == "cancel",
        max_age=config.memory.max_age,
        user_chars=config.memory.user_chars,
        summary_chars=config.memory.summary_chars,
        inject_entries=config.memory.inject_entries,
        redeliver_within=config.engine.redeliver_within,
        max_message_chars=config.engine.max_message_chars,
        media=MediaSettings(
            images=config.media.images,
            voice=config.media.voice,
            transcription=config.media.transcription is not None,
            max_file_bytes=config.media.max_file_bytes,
        ),
    )


def transcriber_from_config(config: ChatbridgeConfig) -> Transcriber | None:
    """OpenAI transcription with the entry `media.transcription` names, or None."""
    chosen = config.media.transcription
    if chosen is None:
        return None
    from chatbridge.providers.transcription import OpenAITranscriber

    entry = config.providers.entries[chosen.provider]
    key = entry.api_key.get_secret_value() if entry.api_key is not None else None
    return OpenAITranscriber(
        chosen.provider,
        model=chosen.model,
        api_key=key,
        base_url=entry.base_url or None,
        timeout=float(entry.timeout),
        max_retries=int(entry.max_retries),
    )


def access_from_config(config: ChatbridgeConfig) -> AccessPolicy:
    return AccessPolicy(
        allow=config.access.allow,
        admins=config.access.admins,
        identities=config.identities,
    )


def _limits(values: LimitValues) -> Limits:
    return Limits(**values.model_dump())


def policy_from_config(config: ChatbridgeConfig) -> LimitPolicy:
    """The `limits` section and each provider's `max_tokens`, `prices` and
    per-image reservation (`core.media.image_tokens`).

    A hold a dead process left expires after the chain's worst time (each
    provider's `timeout` x its attempts) plus a minute, at least 5 minutes.
    """
    limits, providers = config.limits, config.providers
    scope_models = [s.model for s in config.scopes.values() if s.model]
    terms = {}
    for name in providers.chain or tuple(providers.entries):
        entry = providers.entries[name]
        price = entry.prices
        terms[name] = ProviderTerms(
            max_tokens=entry.max_tokens,
            price=None if price is None else Price(price.input_per_mtok, price.output_per_mtok),
            image_tokens=image_tokens(
                entry.type, [entry.model, *scope_models], vision=entry.vision
            ),
        )
    worst = sum(
        providers.entries[n].timeout * (providers.entries[n].max_retries + 1) for n in terms
    )
    return LimitPolicy(
        default=_limits(limits.default),
        people={who: _limits(v.over(limits.default)) for who, v in limits.people.items()},
        admins_exempt=limits.admins_exempt,
        terms=terms,
        first=next(iter(terms), ""),
        hold_ttl=max(DEFAULT_HOLD_TTL, worst + 60.0),
    )


def gate_from_config(config: ChatbridgeConfig, store: Store, clock: Clock | None) -> LimitGate:
    return LimitGate(
        policy_from_config(config),
        store=store,
        clock=clock or SystemClock(),
        timezone=timezone_of(config),
    )


async def store_from_config(config: ChatbridgeConfig) -> Store:
    """The `memory:` section's backend, opened (`chatbridge.stores.open_store`)."""
    memory = config.memory
    return await open_store(
        StoreSettings(
            backend=memory.backend,
            path=Path(memory.path),
            url=memory.url,
            max_entries=memory.max_entries,
        )
    )


def scheduler_for(
    config: ChatbridgeConfig, store: Store, *, clock: Clock | None
) -> ConversationScheduler:
    """In-process ordering for one process; with a store shared by replicas
    (redis) the engine is a replica: conversation leases and cancel notices
    from the store (`Store.replication`), a lease expiring `engine.lease_ttl`
    s after its holder died."""
    ttl = config.engine.lease_ttl
    replication = store.replication(lease_ttl=ttl)
    if replication is None:
        return LocalScheduler()
    return SharedInboxScheduler(
        store, replication.leases, replication.notices, lease_ttl=ttl, clock=clock
    )


@contextlib.asynccontextmanager
async def engine_from_config(
    config: ChatbridgeConfig,
    *,
    environ: Mapping[str, str],
    clock: Clock | None = None,
) -> AsyncIterator[tuple[Engine, ProviderChoice]]:
    """An engine with its store open, provider built and scheduler chosen by
    the store backend (`scheduler_for`); store and provider closed on exit."""
    store = await store_from_config(config)
    try:
        choice = choose_provider(config, environ)
        settings = settings_from_config(config)
        places, pool = resolver_from_config(config, settings=settings, provider=choice.provider)
        engine: Engine | None = None
        try:
            engine = Engine(
                settings,
                store=store,
                provider=choice.provider,
                access=access_from_config(config),
                clock=clock,
                scheduler=scheduler_for(config, store, clock=clock),
                places=places,
                transcriber=transcriber_from_config(config),
                limits=gate_from_config(config, store, clock),
            )
            yield engine, choice
        finally:
            await pool.aclose()
            await choice.provider.aclose()
            closing = getattr(engine.media.transcriber, "aclose", None) if engine else None
            if closing is not None:
                await closing()
    finally:
        await store.aclose()


def secrets_of(config: ChatbridgeConfig, environ: Mapping[str, str]) -> Iterator[str]:
    """Every secret value the logs must never show."""

    def walk(node: Any) -> Iterator[str]:
        if hasattr(node, "get_secret_value"):
            yield node.get_secret_value()
        elif isinstance(node, BaseModel):
            for name in type(node).model_fields:
                yield from walk(getattr(node, name))
            yield from walk(getattr(node, "__pydantic_extra__", None) or {})
        elif isinstance(node, dict):
            for value in node.values():
                yield from walk(value)

    yield from walk(config)
    yield from url_secrets(config.memory.url)
    for _, variable in AUTO_KEYS:
        with contextlib.suppress(ConfigError):
            if key := auto_key(environ, variable):
                yield key
