"""Platform factories by name: serve builds the enabled ones from here.

Each platform package exposes `from_config(section, context) -> Platform`
and is imported only when its section is enabled, so a Telegram-only bot
never loads discord.py or slack-bolt.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chatbridge.config import ChatbridgeConfig
from chatbridge.core.metrics import Metrics
from chatbridge.core.ports import ChannelCursors, MentionRule, MessageHandler, Platform

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["PLATFORMS", "LazyServer", "PlatformContext", "build_platforms"]

log = logging.getLogger(__name__)

PLATFORMS: dict[str, str] = {
    "telegram": "chatbridge.platforms.telegram",
    "discord": "chatbridge.platforms.discord",
    "slack": "chatbridge.platforms.slack",
}


class LazyServer:
    """chatbridge's HTTP app, built (and aiohttp imported) when first asked for.

    A platform that serves webhooks asks while it is built, so the server
    must run before that platform starts; a Telegram bot in polling mode never
    asks, and the server (`/healthz`, `/metrics`) can wait until it polls.
    """

    def __init__(self, build: Callable[[], web.Application]) -> None:
        self._build = build
        self._app: web.Application | None = None

    @property
    def asked(self) -> bool:
        return self._app is not None

    def app(self) -> web.Application:
        if self._app is None:
            self._app = self._build()
        return self._app


@dataclass(frozen=True, slots=True)
class PlatformContext:
    """What a platform factory gets besides its own config section."""

    handler: MessageHandler
    commands: Sequence[tuple[str, str]]
    http: LazyServer  # chatbridge's HTTP server, for webhook routes (`server`)
    cursors: ChannelCursors | None = None  # the store, for platforms that never redeliver
    metrics: Metrics | None = None
    say: Callable[[str], str] | None = None  # the bot's own sentences, in its current language
    mention_rule: MentionRule | None = None  # `require_mention` per place, from the current config

    @property
    def server(self) -> web.Application:
        """The HTTP app, for a platform that adds routes (built on first use)."""
        return self.http.app()


def build_platforms(config: ChatbridgeConfig, context: PlatformContext) -> list[Platform]:
    """Every enabled platform, built (not started), in the config's fixed order."""
    platforms: list[Platform] = []
    for name in config.platforms.enabled:
        module = importlib.import_module(PLATFORMS[name])
        factory = getattr(module, "from_config", None)
        if factory is None:
            log.warning("platforms.%s is enabled but not available in this build; skipped", name)
            continue
        platforms.append(factory(getattr(config.platforms, name), context))
    return platforms
