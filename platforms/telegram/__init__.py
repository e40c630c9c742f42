"""Telegram adapter: Bot API updates in, `handler.accept(msg)` out.

Only translation lives here; sessions, memory, commands and access control
are the engine's business.
"""

from __future__ import annotations

from chatbridge.core.ports import PlatformContext

from ._adapter import ALLOWED_UPDATES, WEBHOOK_PATH, TelegramPlatform
from ._filters import BotIdentity, normalise, normalise_command
from ._format import MarkdownRenderer, Rendered
from ._locate import locate
from ._outbox import MAX_CHARS, TelegramOutbox, sent_message, telegram_delivery
from ._settings import TelegramSettings
from ._webhook import SECRET_HEADER, WebhookReceiver

__all__ = [
    "ALLOWED_UPDATES",
    "MAX_CHARS",
    "SECRET_HEADER",
    "WEBHOOK_PATH",
    "BotIdentity",
    "MarkdownRenderer",
    "Rendered",
    "TelegramOutbox",
    "TelegramPlatform",
    "TelegramSettings",
    "WebhookReceiver",
    "from_config",
    "locate",
    "normalise",
    "normalise_command",
    "sent_message",
    "telegram_delivery",
]


def from_config(settings: TelegramSettings, context: PlatformContext) -> TelegramPlatform:
    """The registry's factory (`core.ports.PlatformFactory`): `settings` is
    `platforms.telegram`."""
    return TelegramPlatform(
        config=settings,
        handler=context.handler,
        commands=context.commands,
        say=context.say,
        mention_rule=context.mention_rule,
    )
