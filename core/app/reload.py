"""Config reload on SIGHUP: a valid file is swapped in whole, an invalid one is
refused line by line (`FILE:LINE: key: message`) and the running config stays.

Applied live: `bot.*`, `engine.*`, the memory limits that shape prompts
(`max_age`, `user_chars`, `summary_chars`, `inject_entries`), `providers.*`,
`access.*`, `identities`, `scopes` (from the next message on) and `limits`
(new limits apply to the next message; what was spent stays counted).
Everything that opens a connection, a file or a port — `platforms.*`,
`memory.backend/path/url/max_entries`, `server.*`, `logging.*` — needs a
restart; a reload that changes one of them says so.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping

from chatbridge.config import ChatbridgeConfig, ConfigError
from chatbridge.core.app.scopes import resolver_from_config
from chatbridge.core.app.wiring import (
    access_from_config,
    choose_provider,
    gate_from_config,
    secrets_of,
    settings_from_config,
)
from chatbridge.core.engine import Engine

__all__ = ["RESTART_KEYS", "Reloader"]

log = logging.getLogger(__name__)

RESTART_KEYS = (
    "platforms",
    "memory.backend",
    "memory.path",
    "memory.url",
    "memory.max_entries",
    "server",
    "logging",
    "media.transcription",
)


def _value(config: ChatbridgeConfig, dotted: str) -> object:
    node: object = config
    for part in dotted.split("."):
        node = getattr(node, part)
    return node.model_dump() if hasattr(node, "model_dump") else node


class Reloader:
    """Re-reads the config file for a running `chatbridge run`."""

    def __init__(
        self,
        *,
        engine: Engine,
        current: ChatbridgeConfig,
        load: Callable[[], ChatbridgeConfig],
        environ: Mapping[str, str],
        stack: contextlib.AsyncExitStack,
        on_secrets: Callable[[Iterable[str]], None] | None = None,
    ) -> None:
        self._engine = engine
        self._current = current
        self._load = load
        self._environ = environ
        self._stack = stack
        self._on_secrets = on_secrets

    async def reload(self) -> bool:
        """True when the new config was swapped in."""
        try:
            new = self._load()
        except ConfigError as exc:
            for issue in exc.issues:
                log.error("reload refused, the running config stays: %s", issue)
            return False
        if self._on_secrets is not None:
            self._on_secrets(secrets_of(new, self._environ))
        for warning in new.warnings:
            log.warning("%s", warning)
        needs_restart = [k for k in RESTART_KEYS if _value(new, k) != _value(self._current, k)]
        if needs_restart:
            log.warning(
                "reload: %s changed; that part applies after a restart", ", ".join(needs_restart)
            )
        choice = choose_provider(new, self._environ)
        settings = settings_from_config(new)
        places, pool = resolver_from_config(new, settings=settings, provider=choice.provider)
        old = self._engine.reconfigure(
            settings,
            provider=choice.provider,
            access=access_from_config(new),
            places=places,
            limits=gate_from_config(new, self._engine.store, self._engine.clock),
        )
        # The scopes' own providers close at shutdown (or with a later reload's).
        self._stack.push_async_callback(pool.aclose)
        # Answers in flight may still use the old provider: close it at shutdown.
        self._stack.push_async_callback(old.aclose)
        self._current = new
        log.info("reloaded the config; provider %s", choice.description)
        return True
