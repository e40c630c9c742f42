"""Telegram adapter: Bot API updates in, `handler.accept(msg)` out.

Only translation lives here; sessions, memory, commands and access control
are the engine's business.
"""

from __future__ import annotations

from typing import Any

from ._adapter import ALLOWED_UPDATES, WEBHOOK_PATH, TelegramPlatform
from ._filters import Accepted, BotIdentity, accept, normalise_command
from ._format import MarkdownRenderer, Rendered
from ._locate import locate
from ._outbox import MAX_CHARS, TelegramOutbox, message_ref

__all__ = [
    "ALLOWED_UPDATES",
    "MAX_CHARS",
    "SECRET_HEADER",
    "WEBHOOK_PATH",
    "Accepted",
    "BotIdentity",
    "MarkdownRenderer",
    "Rendered",
    "TelegramOutbox",
    "TelegramPlatform",
    "WebhookReceiver",
    "accept",
    "from_config",
    "locate",
    "message_ref",
    "normalise_command",
]


def __getattr__(name: str) -> Any:
    """The webhook receiver (and aiohttp with it) loads only when asked for."""
    if name in ("SECRET_HEADER", "WebhookReceiver"):
        from . import _webhook

        return getattr(_webhook, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def from_config(config: Any, context: Any) -> TelegramPlatform:
    """The registry's factory: `config` is `platforms.telegram`, `context` a
    `chatbridge.core.app.registry.PlatformContext`."""
    return TelegramPlatform(
        config=config,
        handler=context.handler,
        commands=context.commands,
        # Only webhook mode adds a route; asking for the server builds it.
        server=context.server if config.mode == "webhook" else None,
        say=getattr(context, "say", None),
        mention_rule=getattr(context, "mention_rule", None),
    )
