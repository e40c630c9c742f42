"""Telegram message drafts (`sendMessageDraft`) as a replacing `LivePreview`.

A draft is a preview in a private chat that is not a message: it costs the
chat no message or edit, and a crash mid-answer leaves nothing behind. The
answer itself then goes out with `sendMessage` (split at 4,096 as always),
never with `editMessageText`. Groups get no drafts (Telegram refuses them
there with TEXTDRAFT_PEER_INVALID), so they keep edits.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable

from telegram import Bot
from telegram.error import InvalidToken

from chatbridge.core.ports import DeliveryError, DeliveryRetry

from ._format import Rendered

__all__ = ["DraftSwitch", "TelegramDraft", "new_draft_id"]

log = logging.getLogger(__name__)

MAX_DRAFT_ID = 2**31 - 1
Deliver = Callable[[str, str, Callable[[Rendered], Awaitable[None]]], Awaitable[None]]
"""`TelegramOutbox._deliver`: (method, text, call) on the shared deliver path."""


def new_draft_id(question_id: int | None) -> int:
    """One non-zero draft_id per reply: the question's message_id (so a reply
    resumed after a restart animates the same draft), else a random one."""
    if question_id is not None and 0 < question_id <= MAX_DRAFT_ID:
        return question_id
    return secrets.randbelow(MAX_DRAFT_ID) + 1


class DraftSwitch:
    """Where drafts are used: everywhere unless `platforms.telegram.drafts` is
    false; no longer in a chat whose draft was refused (a 400); nowhere once the
    Bot API server does not know the method (a 404: an older self-hosted
    server). Each change is logged once; it lasts until the process restarts."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._refused: set[int] = set()

    def allows(self, chat_id: int) -> bool:
        return self.enabled and chat_id not in self._refused

    def refuse(self, chat_id: int, reason: str, *, everywhere: bool) -> None:
        if everywhere and self.enabled:
            self.enabled = False
            log.warning(
                "telegram: the Bot API server does not offer sendMessageDraft (%s); "
                "answers stream by editing messages",
                reason,
            )
        elif not everywhere and chat_id not in self._refused:
            self._refused.add(chat_id)
            log.warning(
                "telegram: drafts refused in chat %s (%s); answers there stream by editing",
                chat_id,
                reason,
            )


class TelegramDraft:
    """The draft of one reply: every `show` replaces it (one draft_id per reply)."""

    appends = False
    message = None  # a draft is no message

    def __init__(
        self,
        deliver: Deliver,
        *,
        bot: Bot,
        chat_id: int,
        thread_id: int | None,
        draft_id: int,
        switch: DraftSwitch,
    ) -> None:
        self._deliver = deliver
        self._bot = bot
        self._chat_id = chat_id
        self._thread_id = thread_id
        self._draft_id = draft_id
        self._switch = switch

    async def show(self, text: str) -> None:
        """Replace the draft with `text`; a refusal turns drafts off for this chat
        (or everywhere) and raises `DeliveryError`, so the reply goes on with edits."""

        async def call(r: Rendered) -> None:
            if not r.text.strip():
                return  # an empty draft would show "Thinking…", not the text
            await self._bot.send_message_draft(
                self._chat_id,
                self._draft_id,
                r.text,
                message_thread_id=self._thread_id,
                entities=r.entities or None,
            )

        try:
            await self._deliver("sendMessageDraft", text, call)
        except DeliveryRetry:
            raise
        except DeliveryError as exc:
            # PTB reports a 404 (no such method) as InvalidToken; the token works.
            unknown = isinstance(exc.__cause__, InvalidToken)
            self._switch.refuse(self._chat_id, str(exc), everywhere=unknown)
            raise

    async def end(self, text: str) -> bool:
        """Nothing to close: the final text is sent as messages, which replace the draft."""
        return False
