"""Platform factories by name: serve builds the enabled ones from here.

Each platform package exposes `from_config(settings, context) -> Platform`
(`core.ports.PlatformFactory`), `settings` being its own typed section; each
is imported only when its section is enabled, so a Telegram-only bot never
loads discord.py or slack-bolt. The builders below are typed, so mypy checks
that every config section satisfies its platform's settings Protocol.
"""

from __future__ import annotations

from collections.abc import Callable

from chatbridge.config import ChatbridgeConfig, PlatformsConfig
from chatbridge.core.ports import Platform, PlatformContext

__all__ = ["FACTORIES", "PLATFORMS", "build_platforms"]

PLATFORMS: dict[str, str] = {
    "telegram": "chatbridge.platforms.telegram",
    "discord": "chatbridge.platforms.discord",
    "slack": "chatbridge.platforms.slack",
}
"""Each platform's package (`chatbridge config explain` asks its `locate`)."""


def _telegram(platforms: PlatformsConfig, context: PlatformContext) -> Platform:
    from chatbridge.platforms.telegram import from_config

    return from_config(platforms.telegram, context)


def _discord(platforms: PlatformsConfig, context: PlatformContext) -> Platform:
    from chatbridge.platforms.discord import from_config

    return from_config(platforms.discord, context)


def _slack(platforms: PlatformsConfig, context: PlatformContext) -> Platform:
    from chatbridge.platforms.slack import from_config

    return from_config(platforms.slack, context)


FACTORIES: dict[str, Callable[[PlatformsConfig, PlatformContext], Platform]] = {
    "telegram": _telegram,
    "discord": _discord,
    "slack": _slack,
}


def build_platforms(config: ChatbridgeConfig, context: PlatformContext) -> list[Platform]:
    """Every enabled platform, built (not started), in the config's fixed order."""
    return [FACTORIES[name](config.platforms, context) for name in config.platforms.enabled]
