"""The `Outbox` for one Discord reply: engine calls -> Discord REST calls.

A `SentMessage` is `"channel_id:message_id"`, so an outbox rebuilt from the
stored reply address after a restart can edit what an earlier one sent.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import discord

from chatbridge.core.models import Attachment
from chatbridge.core.ports import (
    ByteSink,
    DeliveryError,
    DeliveryRetry,
    FetchFailed,
    Found,
    PlatformLimits,
    SentMessage,
)
from chatbridge.platforms._deliver import Delivery
from chatbridge.platforms._download import Downloader
from chatbridge.platforms._look_back import LOOK_LIMIT, judge
from chatbridge.platforms._pacing import RateBudget, priority_now

from ._filters import Address

__all__ = [
    "MAX_CHARS",
    "TYPING_REFRESH",
    "DiscordOutbox",
    "discord_delivery",
    "parse_sent_message",
    "sent_message",
]

log = logging.getLogger(__name__)

MAX_CHARS = 2000
TYPING_REFRESH = 8.0  # Discord shows "typing…" ~10 s per call
THREAD_EXISTS = 160004  # "A thread has already been created for this message"
# An LLM answer must never ping @everyone, roles or users.
NO_PINGS = discord.AllowedMentions.none()
_T = TypeVar("_T")


def sent_message(channel: int, message_id: int) -> SentMessage:
    return f"{channel}:{message_id}"


def parse_sent_message(sent: SentMessage) -> tuple[int, int]:
    channel, _, message = sent.partition(":")
    try:
        return int(channel), int(message)
    except ValueError:
        raise DeliveryError(f"discord edit: not a sent message {sent!r}") from None


def _retry_after(exc: discord.HTTPException) -> float:
    headers: Any = getattr(exc.response, "headers", None) or {}
    try:
        return max(float(headers.get("Retry-After", 1.0)), 0.0)
    except (TypeError, ValueError):
        return 1.0


def classify(exc: Exception, what: str) -> BaseException | None:
    """Discord's error table (`Delivery`): a 429 discord.py gave up on ->
    `DeliveryRetry`, any other refusal -> `DeliveryError` naming `what`."""
    if not isinstance(exc, discord.HTTPException):
        return None
    if exc.status == 429:
        return DeliveryRetry(_retry_after(exc))
    return DeliveryError(f"{what}: {exc.status} {exc.text or exc.code}"[:300])


def discord_delivery() -> Delivery:
    """Discord's `Delivery`; discord.py paces calls by Discord's headers itself,
    so there is no chat gate."""
    return Delivery("discord", classify)


class DiscordOutbox:
    """Sends one answer into the channel (or thread) the question came from.

    Error contract: discord.py paces calls by Discord's rate-limit headers and
    waits out a 429 that carries `Via`; a 429 it raises (no `Via`, a long
    global ban) becomes `DeliveryRetry`; every other failure, Discord's or the
    SDK's (a malformed response), becomes `DeliveryError`. The first message of
    an answer quotes the question; later chunks are continuations.
    `typing()` never raises.

    `posted_before` (`PostedLookup`) reads the channel's (or the answer's
    thread's) history after the question (`channel.history(after=…)`) where an
    earlier process may have answered (`look_back`: the question was not taken
    in by this process), and finds the bot's own message posted for this answer.
    """

    def __init__(
        self,
        client: discord.Client,
        address: Address,
        *,
        edit_interval: float = 1.0,
        thread_name: str = "",
        on_thread: Callable[[int], None] | None = None,
        question: int | None = None,
        look_back: bool = False,
        files: Downloader | None = None,
        pace: RateBudget | None = None,
    ) -> None:
        """`pace` is the bot's budget shared by every answer's calls: under
        load progress edits and typing wait, final text goes first."""
        self.limits = PlatformLimits(
            max_chars=MAX_CHARS, edit_interval=edit_interval, typing_interval=TYPING_REFRESH
        )
        self._client = client
        self._channel = address.channel
        self._reply_to = address.reply_to
        self._open_thread = address.open_thread
        self._thread_name = (thread_name or "Answer")[:90]
        self._on_thread = on_thread
        self._pace = pace
        self._question = question
        self._look_back = look_back
        self._files = files
        self._delivery = discord_delivery()

    async def fetch_file(
        self, attachment: Attachment, *, limit: int, sink: ByteSink | None = None
    ) -> bytearray:
        """`core.ports.FileSource`: the attachment from its CDN URL, capped."""
        if self._files is None:
            raise FetchFailed("discord: this outbox cannot fetch files")
        return await self._files.get(attachment.ref, limit=limit, sink=sink)

    async def send(self, text: str) -> SentMessage:
        if self._open_thread:
            await self._start_thread()

        async def call() -> SentMessage:
            channel = self._client.get_partial_messageable(self._channel)
            if self._reply_to is None:
                sent = await channel.send(text, allowed_mentions=NO_PINGS)
            else:
                reference = discord.MessageReference(
                    message_id=self._reply_to, channel_id=self._channel, fail_if_not_exists=False
                )
                sent = await channel.send(text, reference=reference, allowed_mentions=NO_PINGS)
            return sent_message(self._channel, int(sent.id))

        sent = await self._call("send", call)
        self._reply_to = None
        return sent

    async def edit(self, message: SentMessage, text: str) -> None:
        channel_id, message_id = parse_sent_message(message)

        async def call() -> None:
            partial = self._client.get_partial_messageable(channel_id)
            await partial.get_partial_message(message_id).edit(
                content=text, allowed_mentions=NO_PINGS
            )

        await self._call("edit", call)

    async def posted_before(self, text: str, *, after: SentMessage | None) -> Found:
        question, me = self._question, self._client.user
        if not self._look_back or question is None or me is None:
            return Found()
        # An answer that opens a thread lives in it (the thread has the question's id).
        channel = question if self._open_thread else self._channel
        since = question
        if after is not None:
            with contextlib.suppress(DeliveryError):
                channel, since = parse_sent_message(after)

        async def call() -> list[tuple[SentMessage, str]]:
            messageable = self._client.get_partial_messageable(channel)
            return [
                (sent_message(channel, int(message.id)), message.content)
                async for message in messageable.history(
                    limit=LOOK_LIMIT, after=discord.Object(id=since), oldest_first=True
                )
                if message.author.id == me.id
            ]

        try:
            found = judge(await self._call("history", call), [text])
        except DeliveryError as exc:
            if not self._open_thread:  # no thread yet: nothing was posted in it
                log.warning(
                    "discord: could not look for an answer posted before the restart (%s); "
                    "it may show twice",
                    exc,
                )
            return Found()
        if found.message is not None:
            if channel != self._channel:  # the thread was opened before the restart
                self._channel, self._open_thread = channel, False
                if self._on_thread is not None:
                    self._on_thread(channel)
            self._reply_to = None  # the quote went out with the message found
        return found

    async def typing(self) -> None:
        try:
            if self._pace is not None:
                await self._pace.take(priority_now())
            await self._client.http.send_typing(self._channel)
        except Exception as exc:
            log.debug("discord: typing failed in %s: %s", self._channel, exc)

    async def _start_thread(self) -> None:
        """Opens the answer's thread on the question; a thread that exists already is reused
        (a restart between opening it and the first message)."""
        parent, question = self._channel, self._reply_to
        if question is None:
            self._open_thread = False
            return

        async def call() -> None:
            try:
                await self._client.http.start_thread_with_message(
                    parent, question, name=self._thread_name, auto_archive_duration=1440
                )
            except discord.HTTPException as exc:
                if exc.code != THREAD_EXISTS:
                    raise

        self._open_thread = False
        try:
            await self._call("start thread", call)
        except DeliveryRetry:
            self._open_thread = True
            raise
        except DeliveryError as exc:
            # Missing "Create Public Threads": answer in the channel rather than not at all.
            log.warning("discord: could not open a thread (%s); answering in the channel", exc)
            return
        self._channel, self._reply_to = question, None
        if self._on_thread is not None:
            self._on_thread(question)

    async def _call(self, what: str, call: Callable[[], Awaitable[_T]]) -> _T:
        if self._pace is not None:
            await self._pace.take(priority_now())
        return await self._delivery.call(what, str(self._channel), call)
