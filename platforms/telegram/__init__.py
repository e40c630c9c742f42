"""Telegram adapter: python-telegram-bot in, `engine.handle(msg, outbox)` out.

Only translation lives here; sessions, memory, commands and access control
are the engine's business.
"""

from ._adapter import ALLOWED_UPDATES, WEBHOOK_PATH, EngineLike, TelegramPlatform
from ._filters import Accepted, BotIdentity, accept
from ._format import MarkdownRenderer, Rendered
from ._outbox import MAX_CHARS, TelegramOutbox, TelegramSent
from ._webhook import SECRET_HEADER, WebhookReceiver

__all__ = [
    "ALLOWED_UPDATES",
    "MAX_CHARS",
    "SECRET_HEADER",
    "WEBHOOK_PATH",
    "Accepted",
    "BotIdentity",
    "EngineLike",
    "MarkdownRenderer",
    "Rendered",
    "TelegramOutbox",
    "TelegramPlatform",
    "TelegramSent",
    "WebhookReceiver",
    "accept",
]
