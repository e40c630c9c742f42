"""Platforms by name: serve builds the enabled ones, `config explain` asks their `locate`.

Each platform package exposes `from_config(settings, context) -> Platform`
(`core.ports.PlatformFactory`) and `locate(settings, chat, thread)`,
`settings` being its own Protocol of the keys it reads. A package is imported
only when asked for (its section enabled), so a Telegram-only bot never
loads discord.py or slack-bolt. Each binding below is typed, so mypy checks
that the config's section satisfies its platform's settings Protocol.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from chatbridge.config import ChatbridgeConfig, PlatformsConfig
from chatbridge.core.ports import Platform, PlatformContext

__all__ = ["PLATFORMS", "Bound", "bind", "build_platforms"]


@dataclass(frozen=True, slots=True)
class Bound:
    """One platform package bound to its config section."""

    build: Callable[[PlatformContext], Platform]
    locate: Callable[[str, str], Awaitable[tuple[str, ...] | None]]
    """(chat, thread) -> the place's scope chain, or None when it cannot be asked."""


def _telegram(platforms: PlatformsConfig) -> Bound:
    from chatbridge.platforms import telegram

    section = platforms.telegram
    return Bound(
        build=lambda context: telegram.from_config(section, context),
        locate=lambda chat, thread: telegram.locate(section, chat, thread),
    )


def _discord(platforms: PlatformsConfig) -> Bound:
    from chatbridge.platforms import discord

    section = platforms.discord
    return Bound(
        build=lambda context: discord.from_config(section, context),
        locate=lambda chat, thread: discord.locate(section, chat, thread),
    )


def _slack(platforms: PlatformsConfig) -> Bound:
    from chatbridge.platforms import slack

    section = platforms.slack
    return Bound(
        build=lambda context: slack.from_config(section, context),
        locate=lambda chat, thread: slack.locate(section, chat, thread),
    )


PLATFORMS: dict[str, Callable[[PlatformsConfig], Bound]] = {
    "telegram": _telegram,
    "discord": _discord,
    "slack": _slack,
}


def bind(name: str, platforms: PlatformsConfig) -> Bound:
    """Platform `name`'s package (imported now) bound to its section of `platforms`."""
    return PLATFORMS[name](platforms)


def build_platforms(config: ChatbridgeConfig, context: PlatformContext) -> list[Platform]:
    """Every enabled platform, built (not started), in the config's fixed order."""
    return [bind(name, config.platforms).build(context) for name in config.platforms.enabled]
