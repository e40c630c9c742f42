"""Discord adapter: gateway messages and slash commands in, `handler.accept(msg)` out.

Only translation lives here; sessions, memory, commands and access control
are the engine's business.
"""

from __future__ import annotations

from typing import Any

from ._adapter import INTENT_MISSING, TOKEN_REJECTED, DiscordPlatform, intents
from ._catch_up import CatchUpLimits
from ._commands import InteractionOutbox, build_tree, sync_if_changed
from ._filters import Address, accept, decode_address, encode_address, strip_mention
from ._locate import locate
from ._outbox import MAX_CHARS, TYPING_REFRESH, DiscordOutbox, parse_ref

__all__ = [
    "INTENT_MISSING",
    "MAX_CHARS",
    "TOKEN_REJECTED",
    "TYPING_REFRESH",
    "Address",
    "CatchUpLimits",
    "DiscordOutbox",
    "DiscordPlatform",
    "InteractionOutbox",
    "accept",
    "build_tree",
    "decode_address",
    "encode_address",
    "from_config",
    "intents",
    "locate",
    "parse_ref",
    "strip_mention",
    "sync_if_changed",
]


def from_config(config: Any, context: Any) -> DiscordPlatform:
    """The registry's factory: `config` is `platforms.discord`, `context` a
    `chatbridge.core.app.registry.PlatformContext`."""
    return DiscordPlatform(
        config=config,
        handler=context.handler,
        commands=context.commands,
        server=context.server,
        cursors=getattr(context, "cursors", None),
        metrics=getattr(context, "metrics", None),
        say=getattr(context, "say", None),
        mention_rule=getattr(context, "mention_rule", None),
    )
