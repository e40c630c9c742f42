"""What a platform adapter is, what it calls for every message, and how it is built.

- `Platform`: a running adapter (start, outbox per message, webhook routes);
- `MessageHandler`: the engine as an adapter sees it (`accept`);
  `DirectHandler` adds `handle` for a platform that owns each message's
  outbox in one process (the console);
- `PlatformContext` and `PlatformFactory`: every platform package exposes
  `from_config(settings, context) -> Platform`, where `settings` is its own
  typed config section and `context` what the composition root gives every
  platform besides.

Error tree::

    PlatformError              a platform cannot go on; the message is one sentence
    └── PlatformStartFailed    start-up refused (bad token, missing scope or intent)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from chatbridge.core.models import IncomingMessage
from chatbridge.core.ports.delivery import Outbox
from chatbridge.core.ports.routes import Route
from chatbridge.core.ports.store import ChannelCursors

if TYPE_CHECKING:
    from chatbridge.core.metrics import Metrics

__all__ = [
    "DirectHandler",
    "MentionRule",
    "MessageHandler",
    "OutboxFactory",
    "Platform",
    "PlatformContext",
    "PlatformError",
    "PlatformFactory",
    "PlatformStartFailed",
    "always_mention",
]

OutboxFactory = Callable[[IncomingMessage], Outbox]
"""Where answers to a message go (`Platform.outbox`)."""

MentionRule = Callable[[tuple[str, ...]], bool]
"""Whether a group message at a place (scope IDs, most specific first) must
mention or reply to the bot to be answered (`require_mention`). Adapters ask
it before a message that is not addressed to the bot reaches the inbox; the
engine's `requires_mention` reads the current config."""


def always_mention(place: tuple[str, ...]) -> bool:
    """The rule without scopes: in groups, only messages addressed to the bot."""
    return True


class MessageHandler(Protocol):
    """The engine, as an adapter sees it."""

    async def accept(self, message: IncomingMessage) -> bool:
        """Record `message` durably in the inbox and schedule its answer.

        Returns once the inbox holds it: True for a new message, False for a
        redelivery (already held or answered; drop it). **Acknowledge the
        platform (polling offset, webhook 200, Slack ack) only after this
        returned**; if it raises (`StoreError`: the inbox could not take the
        message), do not acknowledge, so the platform delivers it again.
        The answer goes to `Platform.outbox(message)`, also after a restart.
        """
        ...


class DirectHandler(MessageHandler, Protocol):
    """The engine as a platform sees it that owns each message's outbox in
    one process (the console): it hands a message over together with the
    outbox its answer goes to and waits for that answer."""

    def attach(self, platform: str, outboxes: OutboxFactory) -> None:
        """Answers to `platform`'s messages that `resume` finds go to `outboxes(message)`."""
        ...

    async def resume(self, *, only: Callable[[IncomingMessage], bool] | None = None) -> int:
        """Schedule what the inbox holds from before a restart (with `only`, the
        messages it selects); returns how many."""
        ...

    async def handle(self, message: IncomingMessage, outbox: Outbox) -> None:
        """Accept `message` and answer it into `outbox`; returns once that is done."""
        ...

    async def handle_all(
        self, messages: Sequence[IncomingMessage], outbox: Outbox, *, going: Callable[[], bool]
    ) -> None:
        """`handle` each in turn, all stored first in one write; once `going()`
        is False the rest are closed unanswered."""
        ...


class Platform(Protocol):
    """A running adapter.

    Lifecycle: `start` returns once messages are being received (or raises
    `PlatformStartFailed`); `stop_receiving` stops taking new messages while
    answers in flight may still be sent; `aclose` releases the SDK. Both are
    safe to call twice and after a failed start.
    """

    name: str

    @property
    def routes(self) -> Sequence[Route]:
        """Webhook routes chatbridge's server mounts for this platform (none when
        it polls or holds a socket); they answer 503 until `start`."""
        ...

    @property
    def connected(self) -> bool:
        """True while messages can be received (for readiness checks)."""
        ...

    async def start(self) -> None: ...

    def outbox(self, message: IncomingMessage) -> Outbox:
        """Where answers to `message` go; built from `message.reply_address`
        alone, so it works for a message received before a restart."""
        ...

    async def stop_receiving(self) -> None: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class PlatformContext:
    """What a platform factory gets besides its own config section.

    `say` gives the bot's own sentences in its current language (with it, a
    user whose message the inbox cannot take is told so); `mention_rule` is
    `require_mention` per place from the current config; `cursors` is the
    store, for a platform that never redelivers; `clock` is wall time.
    """

    handler: MessageHandler
    commands: Sequence[tuple[str, str]] = ()
    cursors: ChannelCursors | None = None
    metrics: Metrics | None = None
    say: Callable[[str], str] | None = None
    mention_rule: MentionRule = always_mention
    clock: Callable[[], float] = time.time


_Settings = TypeVar("_Settings", contravariant=True)


class PlatformFactory(Protocol[_Settings]):
    """A platform package's `from_config`: its typed settings and the context
    in, a built (not started) `Platform` out. `settings` is the platform's
    own Protocol, which the config's pydantic section satisfies, so an
    adapter never imports the config."""

    def __call__(self, settings: _Settings, context: PlatformContext, /) -> Platform: ...


class PlatformError(Exception):
    """Root of platform failures; `str()` is one sentence for the admin."""


class PlatformStartFailed(PlatformError):
    """The platform refused to start (rejected token, missing scope or intent)."""
