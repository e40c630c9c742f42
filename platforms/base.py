"""What a platform adapter provides to the engine.

An adapter only translates: SDK event -> `IncomingMessage` ->
`await engine.handle(msg, outbox)`; the `Outbox` turns the engine's reply back
into SDK calls. No session, memory or provider logic lives in `platforms/`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class PlatformLimits:
    """What the shared delivery code must respect for one platform.

    `edit_interval` is the minimum gap between two edits of a streamed
    message; `None` means the platform cannot edit and gets the final text only.
    `measure` is how the platform counts `max_chars` (Telegram counts UTF-16
    code units, so one emoji is two).
    """

    max_chars: int
    edit_interval: float | None = 1.0
    measure: Callable[[str], int] = len


class SentMessage(Protocol):
    """Opaque handle to a message the outbox sent; only the outbox reads it."""


class Outbox(Protocol):
    """Sends one reply into the chat an `IncomingMessage` came from.

    Methods return only once the platform accepted the call. They raise
    `DeliveryRetry` when the platform asks to wait, and `DeliveryError` when a
    call was refused for good.
    """

    limits: PlatformLimits

    async def send(self, text: str) -> SentMessage: ...

    async def edit(self, message: SentMessage, text: str) -> None: ...

    async def typing(self) -> None:
        """Show 'typing…' where the platform has it; a no-op elsewhere."""
        ...


class DeliveryError(Exception):
    """Root of delivery failures.

    `DeliveryError` -> `DeliveryRetry(retry_after)` (flood control; try again
    after waiting). A refused markup is the outbox's own business: it resends
    the text plain, so the answer is never lost.
    """


class DeliveryRetry(DeliveryError):
    def __init__(self, retry_after: float) -> None:
        super().__init__(f"platform asks to retry after {retry_after:g}s")
        self.retry_after = retry_after


class Platform(Protocol):
    """A running adapter; `start` returns once it is receiving messages."""

    name: str

    async def start(self) -> None: ...

    async def aclose(self) -> None:
        """Stop receiving, let replies in flight finish (bounded), release the SDK."""
        ...
