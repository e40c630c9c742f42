"""What every platform adapter needs beyond translating, written once.

Here:

- `reveal`: the plain value of a configured secret; `one_line`: an
  exception as one short line;
- `ChatGate`: a platform's "retry after N s" honoured by every later call
  into that chat, from any reply;
- `take`: the dispatch wrapper: hand a message to the engine, log and
  report failure instead of raising into the SDK's event loop;
- `InboxRefusals`: while the inbox cannot be written, one sentence to the
  chat (at most every few minutes per chat) through the platform's outbox;
- `BackgroundTasks`: tasks an adapter runs (poll loops, catch-up passes),
  cancelled and waited for within a bound.

Beside it, one module each: `_deliver` (`Delivery`: the one send path of
every outbox, errors mapped by the adapter's table, formatted then plain),
`_starting` (`start_or_fail`: start-up failures as one sentence),
`_threads` (`AnsweredThreads`: bounded memory of answered threads),
`_mentions` (`strip_mentions`: the text without the bot's mentions).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from chatbridge.core.models import IncomingMessage
from chatbridge.core.ports import (
    MessageHandler,
    Outbox,
    PlatformError,
    PlatformStartFailed,
)
from chatbridge.core.ports.store import StoreError

__all__ = [
    "BackgroundTasks",
    "ChatGate",
    "InboxRefusals",
    "PlatformError",
    "PlatformStartFailed",
    "Secret",
    "Taken",
    "one_line",
    "reveal",
    "take",
]

log = logging.getLogger(__name__)


class Secret(Protocol):
    """A configured secret (the config's pydantic `SecretStr`): its value only when asked."""

    def get_secret_value(self) -> str: ...


def reveal(secret: Secret | str | None) -> str:
    """The plain value of a secret ("" when unset)."""
    if secret is None or isinstance(secret, str):
        return secret or ""
    return secret.get_secret_value()


def one_line(exc: BaseException) -> str:
    """An exception as one short line (SDK messages can span several)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


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
