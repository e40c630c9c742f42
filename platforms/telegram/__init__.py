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
from ._webhook import SECRET_HEADER, WebhookReceiver

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


def from_config(config: Any, context: Any) -> TelegramPlatform:
    """The registry's factory: `config` is `platforms.telegram`, `context` a
    `chatbridge.core.app.registry.PlatformContext`."""
    return TelegramPlatform(
        config=config,
        handler=context.handler,
        commands=context.commands,
        server=context.server,
        say=getattr(context, "say", None),
        mention_rule=getattr(context, "mention_rule", None),
    )
