"""Shared delivery: stream a reply into a chat within the platform's limits.

Each platform declares `PlatformLimits`; this module owns the throttled
edits, the split at the length limit (never inside a code fence without
closing and reopening it) and waiting out flood control. Answers are never
truncated: a long answer becomes several messages.

Where an outbox offers a `LivePreview` (a `PreviewSource`), progress goes
there instead of into edited messages, paced the same way: a replacing
preview (a draft) shows the part of the text being written, and the final
text is then sent as new messages, never edited in; an appending preview (a
native stream) carries the first message while the answer fits it, and is
ended (then edited like any message) once the answer outgrows it. A preview
the platform refuses is dropped for the rest of the reply, which goes on with
messages and edits, losing and repeating nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeGuard

from chatbridge.core.ports import (
    DeliveryError,
    DeliveryRetry,
    LivePreview,
    Outbox,
    PostedLookup,
    PreviewSource,
    SentMessage,
    in_progress_phase,
)

__all__ = ["StreamingReply", "split_message"]

log = logging.getLogger(__name__)

FENCE = "```"
MAX_RETRY_WAIT = 60.0  # one "retry after" longer than this is capped
FLOOD_BUDGET = 180.0  # total time the final delivery waits out flood control
MIN_FENCED_LIMIT = 64  # real limits are 2000 (Discord) to 40 000 (Slack)
MAX_LOOKS = 5  # lookups for one reply while a message found is ahead of its text


def _open_fence(text: str) -> str | None:
    """The opening line of a code fence still open at the end of `text`."""
    opener: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(FENCE):
            opener = None if opener is not None else stripped
    return opener


def _fit(text: str, limit: int, measure: Callable[[str], int]) -> int:
    """How many leading characters of `text` measure at most `limit`."""
    if measure is len:
        return min(limit, len(text))
    low, high = 0, min(limit, len(text))  # each char counts at least 1 unit
    while low < high:  # largest prefix that fits, by bisection
        middle = (low + high + 1) // 2
        if measure(text[:middle]) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def _break_point(text: str, limit: int) -> int:
    """Where to cut `text` (len > limit): a paragraph, line, then word break."""
    window = text[:limit]
    for separator in ("\n\n", "\n", " "):
        at = window.rfind(separator)
        if at > limit // 2:
            return at + len(separator)
    return limit


def split_message(text: str, limit: int, measure: Callable[[str], int] = len) -> list[str]:
    """Split into chunks measuring at most `limit`, keeping code fences valid.

    A chunk that ends inside a fence is closed with ``` and the next chunk
    reopens it with the same opener (language tag included).
    """
    chunks: list[str] = []
    rest = text
    while measure(rest) > limit:
        cut = _break_point(rest, max(1, _fit(rest, limit, measure)))
        # Below MIN_FENCED_LIMIT reopening fences could eat all progress: hard cuts.
        opener = _open_fence(rest[:cut]) if limit >= MIN_FENCED_LIMIT else None
        if opener is not None:
            # Inside a fence: cut earlier to leave room for the closing one.
            cut = _break_point(rest, _fit(rest, limit - len(FENCE) - 1, measure))
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
    sent: SentMessage
    text: str | None  # None: posted before a restart, its text unknown
    last_call: float = float("-inf")


OnPosted = Callable[[tuple[SentMessage, ...]], Awaitable[None]]


class StreamingReply:
    """One reply being streamed into one chat.

    Pacing (`limits.edit_interval` = I): the first message is posted I after
    the first text arrives, so an answer complete by then is one send and no
    edit; afterwards no message is edited sooner than I after the previous
    call for it, the final edit included. A `DeliveryRetry` holds every later
    call of this reply until its `retry_after` has passed.

    `push` never waits for the platform: progress runs in the background and
    each call shows the latest text. `finish` returns only once the whole
    text is visible, split over as many messages as the length limit needs.
    `sent` seeds messages sent before a restart (they are edited, never
    posted again); `on_posted` is awaited with every `SentMessage` each
    time a new message was posted (a native stream's message included, as
    soon as the platform named it), so the caller can record them durably.
    `aclose` drops a progress call still in flight (a cancelled reply).

    A reply seeded with `sent` never uses a live preview: it is finished in
    the messages it already has. Before its first post a reply asks an outbox
    that can look back (`PostedLookup`) for a message an earlier process
    posted for it without recording it, and adopts that one instead.
    """

    def __init__(
        self,
        outbox: Outbox,
        *,
        sent: tuple[SentMessage, ...] = (),
        on_posted: OnPosted | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._outbox = outbox
        self._monotonic = monotonic
        self._sleep = sleep
        self._on_posted = on_posted
        self._posted: list[_Posted] = [_Posted(message, None) for message in sent]
        self._text = ""
        self._blocked_until = float("-inf")
        self._progress: asyncio.Task[None] | None = None
        self._closing = False
        self._wake = asyncio.Event()  # cuts a progress pause short when finishing
        self._changed = asyncio.Event()  # set by every push
        self._live: LivePreview | None = None  # the outbox's live preview, while in use
        self._live_asked = False  # asked the outbox once, at the first progress call
        self._live_shown = False  # a preview call went through: the user sees text
        self._live_last = float("-inf")  # time of the last preview call
        self._looked = False  # a `PostedLookup` outbox answered before the first post
        self._looks = 0  # lookups made (a message ahead of the text is looked for again)

    @property
    def text(self) -> str:
        return self._text

    @property
    def started(self) -> bool:
        """True once any text of this reply reached the chat (a message or a preview)."""
        return bool(self._posted) or self._live_shown

    @property
    def sent(self) -> tuple[SentMessage, ...]:
        """References of every message this reply has posted (seeded ones included)."""
        return tuple(p.sent for p in self._posted)

    async def push(self, delta: str) -> None:
        self._text += delta
        self._changed.set()
        if self._outbox.limits.edit_interval is None or not self._text.strip():
            return
        if self._progress is None and not self._closing:
            self._progress = asyncio.create_task(self._show_progress())

    async def _pause(self, seconds: float) -> None:
        """Sleep for progress (on the injected `sleep`, so a test clock paces
        it too); returns early when `finish` is called."""
        if seconds > 0 and not self._closing:
            waits = [
                asyncio.ensure_future(self._sleep(seconds)),
                asyncio.ensure_future(self._wake.wait()),
            ]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()

    async def _until_changed(self) -> None:
        """Wait for new text (or `finish`), so an unchanged reply never spins."""
        self._changed.clear()
        waits = [asyncio.ensure_future(e.wait()) for e in (self._changed, self._wake)]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

    async def _show_progress(self) -> None:
        """Show the latest text every interval while it keeps changing, so a
        model that pauses mid-answer does not leave stale text on screen."""
        in_progress_phase()  # this task's calls may wait behind final ones (platform pacing)
        interval = self._outbox.limits.edit_interval or 0.0
        if not self._posted:
            await self._pause(interval)  # a quick answer is then a single send
        shown: str | None = None
        while not self._closing:
            if self._text != shown:
                shown = self._text
                try:
                    if not await self._show(shown, final=False):
                        shown = None  # an edit was not due yet: try again next round
                except DeliveryRetry as exc:
                    _log_wait(exc)
                    self._blocked_until = self._monotonic() + exc.retry_after
                except DeliveryError as exc:
                    log.info("progress edit refused (%s); the final text will follow", exc)
                    return
            await self._pause(max(interval, self._blocked_until - self._monotonic()))
            if self._text == shown:
                await self._until_changed()

    async def finish(self, text: str | None = None) -> None:
        """Deliver the final text (default: everything pushed), waiting out floods.

        Flood control is waited out for up to `FLOOD_BUDGET` seconds in all;
        past that the `DeliveryRetry` is raised, never swallowed.
        """
        self._closing = True
        self._wake.set()
        if self._progress is not None:
            await self._progress  # never raises: _show_progress keeps its errors
        if text is not None:
            self._text = text
        waited = 0.0
        while True:
            try:
                await self._show(self._text, final=True)
                return
            except DeliveryRetry as exc:
                pause = min(exc.retry_after, MAX_RETRY_WAIT)
                if waited + pause > FLOOD_BUDGET:
                    raise  # the caller tells the user, where the platform lets it
                _log_wait(exc)
                waited += pause
                self._blocked_until = self._monotonic() + pause

    async def aclose(self) -> None:
        if self._progress is not None and not self._progress.done():
            self._progress.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._progress

    async def _wait_until(self, moment: float) -> None:
        delay = moment - self._monotonic()
        if delay > 0:
            await self._sleep(delay)

    def _preview(self, *, final: bool) -> LivePreview | None:
        """The live preview to use: asked for once, at the first progress call of
        a reply that has posted nothing (an answer complete before the first
        interval is sent without one)."""
        if not self._live_asked:
            self._live_asked = True
            outbox = self._outbox
            if not final and not self._posted and _previews(outbox):
                self._live = outbox.live_preview()
        return self._live

    async def _show(self, text: str, *, final: bool) -> bool:
        """Show `text`; False when a progress edit was skipped as not yet due."""
        limits = self._outbox.limits
        chunks = split_message(text, limits.max_chars, limits.measure)
        if not await self._look_back(chunks, final=final):
            return False  # a message posted before a restart is ahead: more text first
        live = self._preview(final=final)
        if live is not None:
            try:
                shown = await self._show_live(live, chunks, final=final)
            except DeliveryRetry:
                raise  # the preview stays; the same call is made once the wait is over
            except DeliveryError as exc:
                log.info("live preview refused (%s); going on with messages", exc)
                self._live = None
                if live.appends and self._posted:
                    self._posted[0].text = None  # what its message shows is uncertain now
                shown = None
            if shown is not None:
                return shown
        return await self._show_messages(chunks, final=final)

    async def _look_back(self, chunks: list[str], *, final: bool) -> bool:
        """Before this reply's first post, let a `PostedLookup` outbox find the
        message an earlier process may have posted for it without recording it
        (killed in between); a message found is adopted: edited, not posted
        again. False while a message of the bot is ahead of the text (progress
        then posts nothing yet, and looks again with more text)."""
        if self._looked:
            return True
        outbox = self._outbox
        if not _looks_back(outbox):
            self._looked = True  # asked once: this outbox cannot look back
            return True
        after = self._posted[-1].sent if self._posted else None
        head = chunks[len(self._posted)] if len(chunks) > len(self._posted) else ""
        if not head.strip():
            return True  # nothing to post yet: look when there is
        self._looks += 1
        found = await outbox.posted_before(head, after=after)
        if found.ahead and not final and self._looks < MAX_LOOKS:
            return False
        self._looked = True
        if found.message is None or found.message in self.sent:
            return True
        log.info("a message posted before a restart was found; it is edited, not posted again")
        self._posted.append(_Posted(found.message, None))
        if self._on_posted is not None:
            await self._on_posted(self.sent)
        return True

    async def _show_live(self, live: LivePreview, chunks: list[str], *, final: bool) -> bool | None:
        """Progress through the preview; None when messages take over from here."""
        if not live.appends:
            if final:
                self._live = None  # a draft is no message: the final text is sent
                return None
            return await self._live_call(live, chunks[-1])  # the part being written
        if final or len(chunks) > 1:
            await self._end_live(live, chunks[0], final=final)
            return None
        return await self._live_call(live, chunks[0])

    async def _live_call(self, live: LivePreview, text: str) -> bool:
        interval = self._outbox.limits.edit_interval or 0.0
        if self._monotonic() < self._live_last + interval:
            return False  # not due yet; the next round shows it
        await self._wait_until(self._blocked_until)
        self._live_last = at = self._monotonic()
        try:
            await live.show(text)
        except DeliveryError:
            await self._adopt(live, None, at)  # a message made before the refusal
            raise
        self._live_shown = True
        await self._adopt(live, text, at)
        return True

    async def _adopt(self, live: LivePreview, text: str | None, at: float) -> None:
        """Count the preview's message (if it has one) as this reply's first,
        recording it as soon as it exists, so a crash cannot orphan it."""
        sent = live.message
        if sent is None:
            return
        if not self._posted:
            self._posted.append(_Posted(sent, text, at))
            if self._on_posted is not None:
                await self._on_posted(self.sent)
        else:
            self._posted[0].text, self._posted[0].last_call = text, at

    async def _end_live(self, live: LivePreview, head: str, *, final: bool) -> None:
        """End an appending preview with `head` (the first message's text); its
        message then counts as posted, and is edited if it does not show `head`."""
        if not self._posted:  # nothing streamed: the messages path posts normally
            self._live = None
            return
        posted = self._posted[0]
        if final:  # the closing call is paced like the final edit
            await self._wait_until(self._live_last + (self._outbox.limits.edit_interval or 0.0))
        await self._wait_until(self._blocked_until)
        try:
            done = await live.end(head)
        except DeliveryRetry:
            raise  # the preview stays, so the retry ends it
        except DeliveryError as exc:
            log.info("could not end the live preview (%s); editing its message instead", exc)
            done = False
        self._live = None
        posted.last_call = self._monotonic()
        posted.text = head if done else None

    async def _show_messages(self, chunks: list[str], *, final: bool) -> bool:
        """Post and edit messages; False when a progress edit was not due yet."""
        complete = True
        interval = self._outbox.limits.edit_interval or 0.0
        for index, chunk in enumerate(chunks):
            if not chunk.strip():
                continue
            await self._wait_until(self._blocked_until)
            if index < len(self._posted):
                posted = self._posted[index]
                if posted.text == chunk:
                    continue
                if final:
                    await self._wait_until(posted.last_call + interval)
                elif self._monotonic() < posted.last_call + interval:
                    complete = False  # not due yet; the next round or the final shows it
                    continue
                # The interval runs from the call's return, not its start: the
                # platform then sees the calls at least I apart however long the
                # previous one took to reach it (send-to-send pacing does not).
                await self._outbox.edit(posted.sent, chunk)
                posted.last_call = self._monotonic()
                posted.text = chunk
            else:
                sent = await self._outbox.send(chunk)
                self._posted.append(_Posted(sent, chunk, self._monotonic()))
                if self._on_posted is not None:
                    await self._on_posted(self.sent)
        return complete


def _looks_back(outbox: Outbox) -> TypeGuard[PostedLookup]:
    """Whether `outbox` is a `PostedLookup`, asked once per class: a protocol
    check walks the protocol's members on every call."""
    return _kind_is(type(outbox), PostedLookup)


def _previews(outbox: Outbox) -> TypeGuard[PreviewSource]:
    """Whether `outbox` is a `PreviewSource` (once per class)."""
    return _kind_is(type(outbox), PreviewSource)


@functools.lru_cache(maxsize=256)
def _kind_is(kind: type, protocol: type) -> bool:
    return issubclass(kind, protocol)


def _log_wait(exc: DeliveryRetry) -> None:
    """A waited-out flood limit is worth one INFO line (the answer still arrives)."""
    log.info("the platform asks to wait %gs (rate limit); the reply goes on then", exc.retry_after)


async def send_text(outbox: Outbox, text: str) -> None:
    """A one-shot reply (commands, notices), with the same splitting and retries."""
    try:
        await StreamingReply(outbox).finish(text)
    except DeliveryError as exc:
        log.warning("could not deliver a reply: %s", exc)
