"""What a platform adapter is, and what it calls for every message it receives.

Error tree::

    PlatformError              a platform cannot go on; the message is one sentence
    └── PlatformStartFailed    start-up refused (bad token, missing scope or intent)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from chatbridge.core.models import IncomingMessage
from chatbridge.core.ports.delivery import Outbox

__all__ = [
    "MentionRule",
    "MessageHandler",
    "Platform",
    "PlatformError",
    "PlatformStartFailed",
    "always_mention",
]

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


class Platform(Protocol):
    """A running adapter.

    Lifecycle: `start` returns once messages are being received (or raises
    `PlatformStartFailed`); `stop_receiving` stops taking new messages while
    answers in flight may still be sent; `aclose` releases the SDK. Both are
    safe to call twice and after a failed start.
    """

    name: str

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


class PlatformError(Exception):
    """Root of platform failures; `str()` is one sentence for the admin."""


class PlatformStartFailed(PlatformError):
    """The platform refused to start (rejected token, missing scope or intent)."""
