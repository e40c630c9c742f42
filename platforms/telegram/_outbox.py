"""The `Outbox` for one Telegram reply: engine calls -> Bot API calls."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from telegram import Bot, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import BadRequest, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning
from telegramify_markdown import utf16_len

from platforms.base import DeliveryError, DeliveryRetry, PlatformLimits, SentMessage

from ._format import MarkdownRenderer, Rendered

log = logging.getLogger(__name__)

MAX_CHARS = 4096
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class TelegramSent:
    """Handle to a message this outbox sent (the engine treats it as opaque)."""

    chat_id: int
    message_id: int


class TelegramOutbox:
    """Sends one answer into the chat (and forum topic) the question came from.

    Error contract, per call:
    - flood control (429) -> `DeliveryRetry(retry_after)`; nothing was sent;
    - "message is not modified" on `edit` -> success (the chat already shows it);
    - formatting refused ("can't parse entities") -> the same call is repeated
      with the raw text and no entities, so the answer is never lost;
    - any other Telegram refusal -> `DeliveryError` with a one-line reason.
    `typing()` never raises: a missing indicator must not delay the answer.
    """

    def __init__(
        self,
        bot: Bot,
        chat_id: int,
        *,
        thread_id: int | None = None,
        reply_to: int | None = None,
        edit_interval: float | None = 1.0,
        renderer: MarkdownRenderer | None = None,
    ) -> None:
        self.limits = PlatformLimits(
            max_chars=MAX_CHARS, edit_interval=edit_interval, measure=utf16_len
        )
        self._bot = bot
        self._chat_id = chat_id
        self._thread_id = thread_id
        # Only the first message of an answer quotes the question; later
        # chunks are continuations of that reply.
        self._reply_to = reply_to
        self._renderer = renderer or MarkdownRenderer(MAX_CHARS)

    async def send(self, text: str) -> TelegramSent:
        async def call(r: Rendered) -> TelegramSent:
            reply = None
            if self._reply_to is not None:
                reply = ReplyParameters(self._reply_to, allow_sending_without_reply=True)
            sent = await self._bot.send_message(
                self._chat_id,
                r.text,
                entities=r.entities or None,
                message_thread_id=self._thread_id,
                reply_parameters=reply,
            )
            self._reply_to = None
            return TelegramSent(self._chat_id, sent.message_id)

        return await self._deliver("sendMessage", text, call)

    async def edit(self, message: SentMessage, text: str) -> None:
        if not isinstance(message, TelegramSent):
            raise DeliveryError(f"telegram editMessageText: foreign handle {message!r}")
        target = message

        async def call(r: Rendered) -> None:
            await self._bot.edit_message_text(
                r.text,
                chat_id=target.chat_id,
                message_id=target.message_id,
                entities=r.entities or None,
            )

        try:
            await self._deliver("editMessageText", text, call)
        except _NotModified:
            return

    async def typing(self) -> None:
        try:
            await self._bot.send_chat_action(
                self._chat_id, ChatAction.TYPING, message_thread_id=self._thread_id
            )
        except TelegramError as exc:
            log.debug("telegram: typing action failed in %s: %s", self._chat_id, exc)

    async def _deliver(
        self, method: str, text: str, call: Callable[[Rendered], Awaitable[_T]]
    ) -> _T:
        rendered = self._renderer.render(text)
        try:
            return await _mapped(method, call, rendered)
        except _FormattingRefused:
            log.warning("telegram: %s refused our entities; resending as plain text", method)
            return await _mapped(method, call, MarkdownRenderer.plain(text))


class _NotModified(Exception):
    pass


class _FormattingRefused(Exception):
    pass


async def _mapped(method: str, call: Callable[[Rendered], Awaitable[_T]], r: Rendered) -> _T:
    """Runs one Bot API call, translating PTB errors into the outbox contract."""
    try:
        return await call(r)
    except RetryAfter as exc:
        raise DeliveryRetry(_seconds(exc)) from exc
    except BadRequest as exc:
        reason = exc.message.casefold()
        if "message is not modified" in reason:
            raise _NotModified from exc
        if "can't parse entities" in reason and r.formatted:
            raise _FormattingRefused from exc
        raise DeliveryError(f"telegram {method}: {_one_line(exc)}") from exc
    except TelegramError as exc:
        raise DeliveryError(f"telegram {method}: {_one_line(exc)}") from exc


def _seconds(exc: RetryAfter) -> float:
    # PTB warns that `retry_after` turns into a timedelta in a future major
    # version; accept both shapes now so that change is a non-event.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value if isinstance(value, int | float) else value.total_seconds()


def _one_line(exc: TelegramError) -> str:
    return " ".join(exc.message.split())
