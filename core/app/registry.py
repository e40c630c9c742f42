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

from aiohttp import web

from chatbridge.config import ChatbridgeConfig
from chatbridge.core.metrics import Metrics
from chatbridge.core.ports import ChannelCursors, MentionRule, MessageHandler, Platform

__all__ = ["PLATFORMS", "PlatformContext", "build_platforms"]

log = logging.getLogger(__name__)

PLATFORMS: dict[str, str] = {
    "telegram": "chatbridge.platforms.telegram",
    "discord": "chatbridge.platforms.discord",
    "slack": "chatbridge.platforms.slack",
}


@dataclass(frozen=True, slots=True)
class PlatformContext:
    """What a platform factory gets besides its own config section."""

    handler: MessageHandler
    commands: Sequence[tuple[str, str]]
    server: web.Application  # chatbridge's HTTP server, for webhook routes
    cursors: ChannelCursors | None = None  # the store, for platforms that never redeliver
    metrics: Metrics | None = None
    say: Callable[[str], str] | None = None  # the bot's own sentences, in its current language
    mention_rule: MentionRule | None = None  # `require_mention` per place, from the current config


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
