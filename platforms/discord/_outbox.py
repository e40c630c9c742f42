"""The `Outbox` for one Discord reply: engine calls -> Discord REST calls.

Refs are `"channel_id:message_id"`, so an outbox rebuilt from the stored
reply address after a restart can edit what an earlier one sent.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import discord

from chatbridge.core.models import Attachment
from chatbridge.core.ports import (
    DeliveryError,
    DeliveryRetry,
    FetchFailed,
    PlatformLimits,
    SentMessage,
)
from chatbridge.platforms._download import Downloader
from chatbridge.platforms._runtime import ErrorRule, guarded

from ._filters import Address

__all__ = ["MAX_CHARS", "TYPING_REFRESH", "DiscordOutbox", "parse_ref", "rules"]

log = logging.getLogger(__name__)

MAX_CHARS = 2000
TYPING_REFRESH = 8.0  # Discord shows "typing…" ~10 s per call
THREAD_EXISTS = 160004  # "A thread has already been created for this message"
# An LLM answer must never ping @everyone, roles or users.
NO_PINGS = discord.AllowedMentions.none()
_T = TypeVar("_T")


def parse_ref(ref: SentMessage) -> tuple[int, int]:
    channel, _, message = ref.partition(":")
    try:
        return int(channel), int(message)
    except ValueError:
        raise DeliveryError(f"discord edit: not a message reference {ref!r}") from None


def _retry_after(exc: discord.HTTPException) -> float:
    headers: Any = getattr(exc.response, "headers", None) or {}
    try:
        return max(float(headers.get("Retry-After", 1.0)), 0.0)
    except (TypeError, ValueError):
        return 1.0


def _rate_limited(exc: discord.HTTPException) -> BaseException | None:
    return DeliveryRetry(_retry_after(exc)) if exc.status == 429 else None


def rules(what: str) -> list[ErrorRule]:
    """The SDK error table: a 429 discord.py gave up on -> `DeliveryRetry`,
    any other refusal -> `DeliveryError` naming `what`."""
    return [
        (discord.HTTPException, _rate_limited),
        (
            discord.HTTPException,
            lambda e: DeliveryError(f"discord {what}: {e.status} {e.text or e.code}"[:300]),
        ),
    ]


class DiscordOutbox:
    """Sends one answer into the channel (or thread) the question came from.

    Error contract: discord.py paces calls by Discord's rate-limit headers and
    waits out a 429 that carries `Via`; a 429 it raises (no `Via`, a long
    global ban) becomes `DeliveryRetry`; every other failure, Discord's or the
    SDK's (a malformed response), becomes `DeliveryError`. The first message of
    an answer quotes the question; later chunks are continuations.
    `typing()` never raises.
    """

    def __init__(
        self,
        client: discord.Client,
        address: Address,
        *,
        edit_interval: float = 1.0,
        thread_name: str = "",
        on_thread: Callable[[int], None] | None = None,
        files: Downloader | None = None,
    ) -> None:
        self.limits = PlatformLimits(
            max_chars=MAX_CHARS, edit_interval=edit_interval, typing_interval=TYPING_REFRESH
        )
        self._client = client
        self._channel = address.channel
        self._reply_to = address.reply_to
        self._open_thread = address.open_thread
        self._thread_name = (thread_name or "Answer")[:90]
        self._on_thread = on_thread
        self._files = files

    async def fetch_file(self, attachment: Attachment, *, limit: int) -> bytearray:
        """`core.ports.FileSource`: the attachment from its CDN URL, capped."""
        if self._files is None:
            raise FetchFailed("discord: this outbox cannot fetch files")
        return await self._files.get(attachment.ref, limit=limit)

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
            return f"{self._channel}:{int(sent.id)}"

        ref = await self._call("send", call)
        self._reply_to = None
        return ref

    async def edit(self, message: SentMessage, text: str) -> None:
        channel_id, message_id = parse_ref(message)

        async def call() -> None:
            partial = self._client.get_partial_messageable(channel_id)
            await partial.get_partial_message(message_id).edit(
                content=text, allowed_mentions=NO_PINGS
            )

        await self._call("edit", call)

    async def typing(self) -> None:
        try:
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
        return await guarded(f"discord {what}", call, rules(what))
