"""What the Telegram adapter reads of its config section (`platforms.telegram`).

A Protocol, not the config model: the adapter never imports the config; the
composition root hands it the validated section, which has these fields.
"""

from __future__ import annotations

from typing import Protocol

from chatbridge.platforms._runtime import Secret

__all__ = ["TelegramSettings"]


class TelegramSettings(Protocol):
    @property
    def token(self) -> Secret | None:
        """The bot token from @BotFather."""
        ...

    @property
    def mode(self) -> str:
        """`polling` or `webhook`."""
        ...

    @property
    def base_url(self) -> str:
        """The Bot API root, ending in `/bot`."""
        ...

    @property
    def webhook_url(self) -> str:
        """Where Telegram posts updates (webhook mode)."""
        ...

    @property
    def webhook_secret(self) -> Secret | None:
        """What Telegram sends back in `X-Telegram-Bot-Api-Secret-Token` (webhook mode)."""
        ...

    @property
    def edit_interval(self) -> float:
        """Seconds between two edits of one streamed message."""
        ...

    @property
    def drafts(self) -> bool:
        """Whether private chats stream as drafts."""
        ...
