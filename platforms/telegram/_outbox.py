"""The `Outbox` for one Telegram reply: engine calls -> Bot API calls."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Awaitable, Callable
from typing import TypeVar

from telegram import Bot, Message, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import BadRequest, RetryAfter
from telegram.warnings import PTBDeprecationWarning

from chatbridge.core.models import Attachment
from chatbridge.core.ports import (
    ByteSink,
    DeliveryError,
    DeliveryRetry,
    FetchFailed,
    PlatformLimits,
    SentMessage,
)
from chatbridge.platforms._deliver import Delivery, FormattingRefused
from chatbridge.platforms._runtime import ChatGate

from ._drafts import DraftSwitch, TelegramDraft, new_draft_id
from ._files import TelegramFiles
from ._format import MarkdownRenderer, Rendered, utf16_len

log = logging.getLogger(__name__)

MAX_CHARS = 4096
TYPING_REFRESH = 4.0  # Telegram shows "typing" for ~5 s per call
_T = TypeVar("_T")


def sent_message(chat_id: int, message_id: int) -> SentMessage:
    return f"{chat_id}:{message_id}"


def parse_sent_message(sent: SentMessage) -> tuple[int, int]:
    chat, _, message = sent.rpartition(":")
    try:
        return int(chat), int(message)
    except ValueError:
        raise DeliveryError(f"telegram editMessageText: not a sent message {sent!r}") from None


class _NotModified(DeliveryError):
    """An edit that changed nothing: the chat already shows the text."""


def classify(exc: Exception, what: str) -> BaseException | None:
    """Telegram's error table (`Delivery`): flood control, an edit that changed
    nothing, formatting refused; the rest falls to `DeliveryError`."""
    if isinstance(exc, RetryAfter):
        return DeliveryRetry(_seconds(exc))
    if isinstance(exc, BadRequest):
        reason = exc.message.casefold()
        if "message is not modified" in reason:
            return _NotModified(what)
        if "can't parse entities" in reason:
            return FormattingRefused()
    return None


class TelegramOutbox:
    """Sends one answer into the chat (and forum topic) the question came from.

    Error contract, per call:
    - flood control (429) -> `DeliveryRetry(retry_after)`; nothing was sent, and
      every later call into this chat (any reply's) waits until then;
    - "message is not modified" on `edit` -> success (the chat already shows it);
    - formatting refused ("can't parse entities") -> the same call is repeated
      with the raw text and no entities, so the answer is never lost;
    - any other failure, Telegram's or the SDK's -> `DeliveryError`.
    `typing()` never raises: a missing indicator must not delay the answer.

    In a private chat it offers a draft (`live_preview`) unless `drafts` says
    drafts are off there; the shared delivery code then streams into the
    draft and sends the final text as new messages.
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
        delivery: Delivery | None = None,
        private: bool = False,
        drafts: DraftSwitch | None = None,
        files: TelegramFiles | None = None,
    ) -> None:
        self.limits = PlatformLimits(
            max_chars=MAX_CHARS,
            edit_interval=edit_interval,
            measure=utf16_len,
            typing_interval=TYPING_REFRESH,
        )
        self._bot = bot
        self._chat_id = chat_id
        self._thread_id = thread_id
        # Only the first message of an answer quotes the question; later
        # chunks are continuations of that reply.
        self._reply_to = reply_to
        self._renderer = renderer or MarkdownRenderer(MAX_CHARS)
        self._delivery = delivery or telegram_delivery()
        self._private = private
        self._drafts = drafts
        self._draft_id = new_draft_id(reply_to)
        self._files = files

    async def fetch_file(
        self, attachment: Attachment, *, limit: int, sink: ByteSink | None = None
    ) -> bytearray:
        """`core.ports.FileSource`: the attachment's bytes through getFile."""
        if self._files is None:
            raise FetchFailed("telegram: this outbox cannot fetch files")
        return await self._files.fetch(attachment, limit=limit, sink=sink)

    async def send(self, text: str) -> SentMessage:
        reply = None
        if self._reply_to is not None:
            reply = ReplyParameters(self._reply_to, allow_sending_without_reply=True)

        async def call(r: Rendered) -> Message:
            return await self._bot.send_message(
                self._chat_id,
                r.text,
                entities=r.entities or None,
                message_thread_id=self._thread_id,
                reply_parameters=reply,
            )

        sent = await self._deliver("sendMessage", text, call)
        self._reply_to = None
        return sent_message(self._chat_id, sent.message_id)

    async def edit(self, message: SentMessage, text: str) -> None:
        chat_id, message_id = parse_sent_message(message)

        async def call(r: Rendered) -> None:
            await self._bot.edit_message_text(
                r.text, chat_id=chat_id, message_id=message_id, entities=r.entities or None
            )

        try:
            await self._deliver("editMessageText", text, call)
        except _NotModified:
            return

    def live_preview(self) -> TelegramDraft | None:
        """A draft for this reply in a private chat where drafts are on, else None."""
        drafts = self._drafts
        if not self._private or drafts is None or not drafts.allows(self._chat_id):
            return None
        return TelegramDraft(
            self._deliver,
            bot=self._bot,
            chat_id=self._chat_id,
            thread_id=self._thread_id,
            draft_id=self._draft_id,
            switch=drafts,
        )

    async def typing(self) -> None:
        try:
            await self._bot.send_chat_action(
                self._chat_id, ChatAction.TYPING, message_thread_id=self._thread_id
            )
        except Exception as exc:
            log.debug("telegram: typing action failed in %s: %s", self._chat_id, exc)

    async def _deliver(
        self, method: str, text: str, call: Callable[[Rendered], Awaitable[_T]]
    ) -> _T:
        """`call` with the rendered text, resent plain if Telegram refuses the entities."""
        rendered = self._renderer.render(text)
        plain = MarkdownRenderer.plain(text) if rendered.formatted else None
        return await self._delivery.send(method, str(self._chat_id), call, rendered, plain)


def telegram_delivery(gate: ChatGate | None = None) -> Delivery:
    """The bot's one `Delivery`: `gate` shared by every reply's outbox."""
    return Delivery("telegram", classify, gate=gate or ChatGate())


def _seconds(exc: RetryAfter) -> float:
    # PTB warns that `retry_after` turns into a timedelta in a future major
    # version; accept both shapes now so that change is a non-event.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value if isinstance(value, int | float) else value.total_seconds()
