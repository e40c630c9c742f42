"""Discord adapter: gateway messages and slash commands in, `handler.accept(msg)` out.

Only translation lives here; sessions, memory, commands and access control
are the engine's business.
"""

from __future__ import annotations

from chatbridge.core.ports import PlatformContext

from ._adapter import INTENT_MISSING, TOKEN_REJECTED, DiscordPlatform, intents
from ._catch_up import CatchUpLimits
from ._commands import InteractionOutbox, build_tree, sync_if_changed
from ._filters import Address, decode_address, encode_address, normalise
from ._locate import locate
from ._outbox import MAX_CHARS, TYPING_REFRESH, DiscordOutbox, parse_sent_message, sent_message
from ._settings import DiscordSettings

__all__ = [
    "INTENT_MISSING",
    "MAX_CHARS",
    "TOKEN_REJECTED",
    "TYPING_REFRESH",
    "Address",
    "CatchUpLimits",
    "DiscordOutbox",
    "DiscordPlatform",
    "DiscordSettings",
    "InteractionOutbox",
    "build_tree",
    "decode_address",
    "encode_address",
    "from_config",
    "intents",
    "locate",
    "normalise",
    "parse_sent_message",
    "sent_message",
    "sync_if_changed",
]


def from_config(settings: DiscordSettings, context: PlatformContext) -> DiscordPlatform:
    """The registry's factory (`core.ports.PlatformFactory`): `settings` is
    `platforms.discord`."""
    return DiscordPlatform(
        config=settings,
        handler=context.handler,
        commands=context.commands,
        cursors=context.cursors,
        metrics=context.metrics,
        clock=context.clock,
        say=context.say,
        mention_rule=context.mention_rule,
    )
