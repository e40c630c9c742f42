"""What every platform adapter needs beyond translating, written once.

- `reveal`: the plain value of a configured secret;
- `guarded`: one SDK call mapped into the delivery error tree by a table of
  rules; **any other exception becomes `DeliveryError`** (an SDK fed a
  malformed reply by a third-party server raises TypeError/KeyError, and an
  unmapped error would make delivery code retry or crash);
- `formatted_or_plain`: send formatted, resend plain when the platform
  refuses the formatting, so an answer is never lost to markup;
- `ChatGate`: a platform's "retry after N s" honoured by every later call
  into that chat, from any reply;
- `accept_safely` / `take`: the dispatch wrapper: hand a message to the
  engine, log and report failure instead of raising into the SDK's event loop;
- `InboxRefusals`: while the inbox cannot be written, one sentence to the
  chat (at most every few minutes per chat) through the platform's outbox;
- `BackgroundTasks`: tasks an adapter runs (poll loops, socket clients),
  closed within a bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from chatbridge.core.models import IncomingMessage
from chatbridge.core.ports import (
    DeliveryError,
    MessageHandler,
    Outbox,
    PlatformError,
    PlatformStartFailed,
)
from chatbridge.core.ports.store import StoreError

__all__ = [
    "BackgroundTasks",
    "ChatGate",
    "ErrorRule",
    "InboxRefusals",
    "PlatformError",
    "PlatformStartFailed",
    "Taken",
    "accept_safely",
    "formatted_or_plain",
    "guarded",
    "one_line",
    "reveal",
    "take",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
ErrorRule = tuple[type[BaseException], Callable[[Any], BaseException | None]]
"""(SDK exception class, translate): translate returns the exception to raise
instead, or None to fall through to the next rule."""


def reveal(secret: Any) -> str:
    """The plain value of a pydantic `SecretStr` (or of a plain string)."""
    if hasattr(secret, "get_secret_value"):
        return str(secret.get_secret_value())
    return str(secret or "")


def one_line(exc: BaseException) -> str:
    """An exception as one short line (SDK messages can span several)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


async def guarded(what: str, call: Callable[[], Awaitable[_T]], rules: Sequence[ErrorRule]) -> _T:
    """`await call()`, with every exception mapped by `rules`, else `DeliveryError`."""
    try:
        return await call()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        for kind, translate in rules:
            if isinstance(exc, kind):
                mapped = translate(exc)
                if mapped is not None:
                    raise mapped from exc
        raise DeliveryError(f"{what}: {one_line(exc)}") from exc


class FormattingRefused(Exception):
    """Raised by an error rule when the platform rejected our markup."""


async def formatted_or_plain(
    what: str, formatted: Callable[[], Awaitable[_T]], plain: Callable[[], Awaitable[_T]]
) -> _T:
    """Try `formatted()`; when it raises `FormattingRefused`, send `plain()`."""
    try:
        return await formatted()
    except FormattingRefused:
        log.warning("%s: formatting refused; resending as plain text", what)
        return await plain()


class ChatGate:
    """Per-chat "not before" times from flood control (429 retry_after)."""

    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._until: dict[str, float] = {}
        self._monotonic = monotonic

    def block(self, chat: str, seconds: float) -> None:
        until = self._monotonic() + seconds
        if until > self._until.get(chat, 0.0):
            self._until[chat] = until

    async def wait(self, chat: str) -> None:
        until = self._until.get(chat)
        if until is None:
            return
        delay = until - self._monotonic()
        if delay <= 0:
            del self._until[chat]
            return
        await asyncio.sleep(delay)


class Taken(enum.Enum):
    """What became of a message handed to the engine (`take`)."""

    NEW = "taken"  # the inbox holds it now
    DUPLICATE = "duplicate"  # it held (or answered) it already
    REFUSED = "refused"  # it could not take it: do not acknowledge the platform


class InboxRefusals:
    """The one sentence a user gets while the inbox cannot take their message.

    The message itself is not acknowledged (it comes again, and is answered
    once the store takes writes); without this the user would hear nothing.
    `say` gives the bot's own sentences in its current language, `outbox` the
    platform's outbox for a message. At most one notice per chat every
    `every` seconds, however often the platform redelivers.
    """

    NOTICE = "inbox_full"

    def __init__(
        self,
        say: Callable[[str], str],
        outbox: Callable[[IncomingMessage], Outbox],
        *,
        every: float = 300.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._say, self._outbox = say, outbox
        self._every, self._monotonic = every, monotonic
        self._told: dict[str, float] = {}

    async def tell(self, message: IncomingMessage) -> None:
        """Send the notice to `message`'s chat unless it had one lately; never raises."""
        chat, now = message.conversation.chat_id, self._monotonic()
        if now - self._told.get(chat, -self._every) < self._every:
            return
        if len(self._told) > 10_000:  # bounded: forget chats told long ago
            self._told = {c: at for c, at in self._told.items() if now - at < self._every}
        self._told[chat] = now
        try:
            async with asyncio.timeout(30):
                await self._outbox(message).send(self._say(self.NOTICE))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("could not tell %s that its message waits: %s", chat, one_line(exc))


async def take(
    platform: str,
    handler: MessageHandler,
    message: IncomingMessage,
    *,
    refusals: InboxRefusals | None = None,
) -> Taken:
    """Hand `message` to the engine; never raises (but cancellation), so an
    SDK's dispatch loop goes on. On `Taken.REFUSED` (store down, shutting
    down) the caller must not acknowledge the platform, so it comes again;
    when the store refused (`StoreError`, e.g. a full disk) `refusals` tells
    the user so."""
    try:
        new = await handler.accept(message)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning("%s: could not take %s in: %s", platform, message.event_id, one_line(exc))
        log.debug("%s: accept failed", platform, exc_info=True)
        if refusals is not None and isinstance(exc, StoreError):
            await refusals.tell(message)
        return Taken.REFUSED
    return Taken.NEW if new is not False else Taken.DUPLICATE


async def accept_safely(
    platform: str,
    handler: MessageHandler,
    message: IncomingMessage,
    *,
    refusals: InboxRefusals | None = None,
) -> bool:
    """Hand `message` to the engine; True once the inbox holds it (or had it).

    False when the engine could not take it (store down, shutting down): the
    caller must then not acknowledge the platform, so it is delivered again.
    Never raises (but cancellation), so an SDK's dispatch loop goes on.
    """
    return await take(platform, handler, message, refusals=refusals) is not Taken.REFUSED


class BackgroundTasks:
    """Tasks an adapter owns; `aclose` cancels them and waits at most `timeout`."""

    def __init__(self, platform: str) -> None:
        self._platform = platform
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(work, name=f"{self._platform}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("%s: %s stopped: %s", self._platform, task.get_name(), exc)

    async def aclose(self, grace: float = 5.0) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait(tasks, timeout=grace)
