"""One deliver path for every outbox: wait for the chat, call, map errors, fall back to plain.

An outbox hands `Delivery.send` the SDK call and the bodies to try (its
rendering of the text, and the plain text to resend when the platform
refuses the rendering); `Delivery.call` is the same path for a call with
nothing to render. Every SDK exception leaves as one of the delivery
errors (`core.ports.delivery`), mapped by the adapter's `Classify` table;
**any exception the table does not map becomes `DeliveryError`** (an SDK
fed a malformed reply by a third-party server raises TypeError/KeyError,
and an unmapped error would make delivery code retry or crash).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from chatbridge.core.ports import DeliveryError, DeliveryRetry
from chatbridge.platforms._runtime import ChatGate, one_line

__all__ = ["Classify", "Delivery", "FormattingRefused"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_B = TypeVar("_B")

Classify = Callable[[Exception, str], BaseException | None]
"""An adapter's SDK error table: `(exception, what)` -> what to raise instead:
`DeliveryRetry(seconds)` for flood control, `FormattingRefused()` when the
platform refused the markup, a `DeliveryError` in the platform's own words;
None: `DeliveryError` naming `what` (e.g. "slack chat.update") and the
exception in one line."""


class FormattingRefused(DeliveryError):
    """What a `Classify` table returns when the platform rejected our markup;
    `Delivery.send` then resends plain text, so it never reaches an outbox's caller."""

    def __init__(self) -> None:
        super().__init__("formatting refused")


class Delivery:
    """One platform's calls into its chats: `platform` names them in errors and
    logs; `classify` maps its SDK's exceptions; `gate` (optional) holds every
    call into a chat that was told to wait (429) until then."""

    def __init__(self, platform: str, classify: Classify, *, gate: ChatGate | None = None) -> None:
        self._platform = platform
        self._classify = classify
        self._gate = gate

    async def send(
        self,
        method: str,
        chat: str,
        call: Callable[[_B], Awaitable[_T]],
        body: _B,
        plain: _B | None = None,
    ) -> _T:
        """`await call(body)`; when the platform refuses its formatting,
        `await call(plain)` once (logged). Without `plain` (nothing was
        formatted) a refusal is a `DeliveryError`."""
        if plain is None:
            return await self._attempt(method, chat, lambda: call(body), formatted=False)
        fallback: _B = plain
        try:
            return await self._attempt(method, chat, lambda: call(body), formatted=True)
        except FormattingRefused:
            log.warning(
                "%s %s: formatting refused; resending as plain text", self._platform, method
            )
        return await self._attempt(method, chat, lambda: call(fallback), formatted=False)

    async def call(self, method: str, chat: str, call: Callable[[], Awaitable[_T]]) -> _T:
        """`await call()` into `chat`, nothing to format, errors mapped as for `send`."""
        return await self._attempt(method, chat, call, formatted=False)

    async def _attempt(
        self, method: str, chat: str, call: Callable[[], Awaitable[_T]], *, formatted: bool
    ) -> _T:
        if self._gate is not None:
            await self._gate.wait(chat)
        try:
            return await call()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise self._mapped(exc, f"{self._platform} {method}", chat, formatted) from exc

    def _mapped(self, exc: Exception, what: str, chat: str, formatted: bool) -> BaseException:
        mapped = self._classify(exc, what)
        if isinstance(mapped, FormattingRefused) and formatted:
            return mapped
        if mapped is None or isinstance(mapped, FormattingRefused):
            return DeliveryError(f"{what}: {one_line(exc)}")
        if isinstance(mapped, DeliveryRetry) and self._gate is not None:
            self._gate.block(chat, mapped.retry_after)
        return mapped
