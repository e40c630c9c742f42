"""Where a Telegram chat sits, for `chatbridge config explain`: Telegram has
no servers, so a chat (and each forum topic in it) is in the platform only."""

from __future__ import annotations

from ._settings import TelegramSettings

__all__ = ["locate"]


async def locate(config: TelegramSettings, chat: str, thread: str = "") -> tuple[str, ...] | None:
    """`(telegram:CHAT, telegram)`; a topic follows its group."""
    return (f"telegram:{chat}", "telegram")
