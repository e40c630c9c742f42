"""Telegram's limits, paced per chat and per bot, final text first.

Telegram allows a bot about 30 messages a second in all, about one a second
in one chat (short bursts pass) and 20 a minute in one group. PTB's
`AIORateLimiter` sends every chat call through one first-come queue, so under
load an answer's final text waits behind other chats' progress edits. Here
each chat has its own budget, and the bot's shared budget lets final calls
(the answer's text, commands, notices) go before progress (edits, drafts,
typing): with 20 chats at once progress slows down, the answers do not.

Drafts and typing are not messages: they spend only the bot's budget. Calls
without a chat (getUpdates, getMe, setMyCommands) are not paced. A 429 is
not retried here (`max_retries=0` as before): the outbox turns it into
`DeliveryRetry` and the shared delivery code waits it out.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from telegram.ext import BaseRateLimiter

from chatbridge.platforms._pacing import RateBudget, priority_now

__all__ = ["TelegramPacer"]

# The bot's budget: 25 a second plus a burst of 5, so no second ever holds
# more than Telegram's 30.
BOT_RATE, BOT_BURST = 25.0, 5.0
PRIVATE_RATE, PRIVATE_BURST = 1.0, 3.0  # one message a second in a chat, bursts of 3
GROUP_RATE, GROUP_BURST = 20 / 60, 20.0  # 20 messages a minute in a group
NOT_MESSAGES = frozenset({"sendChatAction", "sendMessageDraft"})
MAX_CHATS = 1024  # idle chat budgets are dropped past this many


class TelegramPacer(BaseRateLimiter[int]):
    """A PTB rate limiter: per-chat budgets, and the bot's budget by priority."""

    def __init__(
        self,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        clock: dict[str, Any] = {"monotonic": monotonic}
        if sleep is not None:
            clock["sleep"] = sleep
        self._clock = clock
        self._bot = RateBudget(BOT_RATE, burst=BOT_BURST, **clock)
        self._chats: dict[int | str, RateBudget] = {}

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to release."""

    def _chat(self, chat_id: int | str) -> RateBudget:
        budget = self._chats.get(chat_id)
        if budget is None:
            if len(self._chats) >= MAX_CHATS:
                self._chats = {k: b for k, b in self._chats.items() if b.waiting}
            group = isinstance(chat_id, str) or chat_id < 0
            rate, burst = (GROUP_RATE, GROUP_BURST) if group else (PRIVATE_RATE, PRIVATE_BURST)
            budget = self._chats[chat_id] = RateBudget(rate, burst=burst, **self._clock)
        return budget

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, Any]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: int | None,
    ) -> Any:
        """Returns the call's result once it was made within the budgets."""
        chat_id = data.get("chat_id")
        if chat_id is None:
            return await callback(*args, **kwargs)
        priority = priority_now()
        if endpoint not in NOT_MESSAGES:
            try:
                chat_key: int | str = int(chat_id)
            except (TypeError, ValueError):
                chat_key = str(chat_id)
            await self._chat(chat_key).take(priority)
        await self._bot.take(priority)
        return await callback(*args, **kwargs)
