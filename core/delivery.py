"""Shared delivery: stream a reply into a chat within the platform's limits.

Each platform declares `PlatformLimits`; this module owns the throttled
edits, the split at the length limit (never inside a code fence without
closing and reopening it) and waiting out flood control. Answers are never
truncated: a long answer becomes several messages.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from platforms.base import DeliveryError, DeliveryRetry, Outbox, SentMessage

__all__ = ["StreamingReply", "split_message"]

log = logging.getLogger(__name__)

FENCE = "```"
MAX_DELIVERY_ATTEMPTS = 5
MAX_RETRY_WAIT = 60.0


def _open_fence(text: str) -> str | None:
    """The opening line of a code fence still open at the end of `text`."""
    opener: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(FENCE):
            opener = None if opener is not None else stripped
    return opener


def _break_point(text: str, limit: int) -> int:
    """Where to cut `text` (len > limit): a paragraph, line, then word break."""
    window = text[:limit]
    for separator in ("\n\n", "\n", " "):
        at = window.rfind(separator)
        if at > limit // 2:
            return at + len(separator)
    return limit


def split_message(text: str, limit: int) -> list[str]:
    """Split into chunks of at most `limit` chars, keeping code fences valid.

    A chunk that ends inside a fence is closed with ``` and the next chunk
    reopens it with the same opener (language tag included).
    """
    chunks: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = _break_point(rest, limit)
        opener = _open_fence(rest[:cut])
        if opener is not None:
            # Inside a fence: cut earlier to leave room for the closing one.
            cut = _break_point(rest, limit - len(FENCE) - 1)
            opener = _open_fence(rest[:cut])
        head, rest = rest[:cut], rest[cut:]
        if opener is not None:
            if len(opener) > limit // 4:  # an absurd opener must not stall the loop
                opener = FENCE
            head = head.rstrip("\n") + "\n" + FENCE
            rest = opener + "\n" + rest
        chunks.append(head.rstrip())
        rest = rest.lstrip("\n") if opener is None else rest
    if rest.strip() or not chunks:
        chunks.append(rest.rstrip())
    return chunks


@dataclass(slots=True)
class _Posted:
    handle: SentMessage
    text: str


class StreamingReply:
    """One reply being streamed into one chat.

    `push` may show progress (throttled to `limits.edit_interval`); `finish`
    returns only once the whole text is visible, split over as many
    messages as the platform's length limit needs.
    """

    def __init__(
        self,
        outbox: Outbox,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._outbox = outbox
        self._monotonic = monotonic
        self._sleep = sleep
        self._posted: list[_Posted] = []
        self._text = ""
        self._next_edit_at = 0.0

    @property
    def text(self) -> str:
        return self._text

    @property
    def started(self) -> bool:
        """True once any text of this reply reached the chat."""
        return bool(self._posted)

    async def push(self, delta: str) -> None:
        self._text += delta
        interval = self._outbox.limits.edit_interval
        if interval is None or not self._text.strip():
            return
        now = self._monotonic()
        if now < self._next_edit_at:
            return
        try:
            await self._show(self._text)
            self._next_edit_at = now + interval
        except DeliveryRetry as exc:
            # Progress is optional: skip edits until flood control has passed.
            self._next_edit_at = now + exc.retry_after

    async def finish(self, text: str | None = None) -> None:
        """Deliver the final text (default: everything pushed), retrying floods."""
        if text is not None:
            self._text = text
        for attempt in range(1, MAX_DELIVERY_ATTEMPTS + 1):
            try:
                await self._show(self._text)
                return
            except DeliveryRetry as exc:
                if attempt == MAX_DELIVERY_ATTEMPTS:
                    raise
                await self._sleep(min(exc.retry_after, MAX_RETRY_WAIT))

    async def _show(self, text: str) -> None:
        chunks = split_message(text, self._outbox.limits.max_chars)
        for index, chunk in enumerate(chunks):
            if not chunk.strip():
                continue
            if index < len(self._posted):
                posted = self._posted[index]
                if posted.text != chunk:
                    await self._outbox.edit(posted.handle, chunk)
                    posted.text = chunk
            else:
                handle = await self._outbox.send(chunk)
                self._posted.append(_Posted(handle, chunk))


async def send_text(outbox: Outbox, text: str) -> None:
    """A one-shot reply (commands, notices), with the same splitting and retries."""
    try:
        await StreamingReply(outbox).finish(text)
    except DeliveryError as exc:
        log.warning("could not deliver a reply: %s", exc)
