"""How an answer reaches a chat: the `Outbox` one platform provides per reply.

Error tree::

    DeliveryError              the platform refused the call for good
    └── DeliveryRetry          flood control: nothing was sent, retry after `retry_after`

An outbox maps every failure of its SDK into this tree (unexpected SDK
exceptions included), so delivery code never sees an SDK exception.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["DeliveryError", "DeliveryRetry", "Outbox", "PlatformLimits", "SentMessage"]

SentMessage = str
"""Reference to a message an outbox sent, e.g. ``"-100123:42"``.

A plain string so it can be stored with an inbox entry: an outbox built for
the same chat after a restart can still edit that message.
"""


@dataclass(frozen=True, slots=True)
class PlatformLimits:
    """What the shared delivery code must respect for one platform.

    `edit_interval` is the minimum gap between two edits of one streamed
    message; `None` means the platform cannot edit and gets the final text
    only. `measure` is how the platform counts `max_chars` (Telegram counts
    UTF-16 code units, so one emoji is two). `typing_interval` is how often
    the typing indicator must be renewed while nothing is shown yet (Telegram
    shows it ~5 s per call; `None`: the platform has none).
    """

    max_chars: int
    edit_interval: float | None = 1.0
    measure: Callable[[str], int] = len
    typing_interval: float | None = None


class Outbox(Protocol):
    """Sends one reply into the chat an `IncomingMessage` came from.

    Methods return only once the platform accepted the call. They raise
    `DeliveryRetry` when the platform asks to wait and `DeliveryError` when a
    call was refused for good; nothing else.
    """

    limits: PlatformLimits

    async def send(self, text: str) -> SentMessage: ...

    async def edit(self, message: SentMessage, text: str) -> None:
        """Replace the text of a message this chat's outbox sent (also before a restart)."""
        ...

    async def typing(self) -> None:
        """Show 'typing…' where the platform has it; never raises."""
        ...


class DeliveryError(Exception):
    """Root of delivery failures; the message is one line naming the call."""


class DeliveryRetry(DeliveryError):
    def __init__(self, retry_after: float) -> None:
        super().__init__(f"platform asks to retry after {retry_after:g}s")
        self.retry_after = retry_after
