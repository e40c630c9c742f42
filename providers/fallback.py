"""A chain of providers that looks like one: the next answers when one fails early.

"Early" means before any text reached the consumer. Once text went out, a
failure propagates: stitching a second model's answer onto a half-finished
first one would read as one garbled reply.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence

from chatbridge.providers.base import (
    Prompt,
    Provider,
    ProviderError,
    RateLimited,
    StreamEvent,
    TextDelta,
)

_log = logging.getLogger(__name__)


def _all_failed(errors: Sequence[tuple[str, ProviderError]]) -> ProviderError:
    """The last error's class (so callers can still branch on it), with a message
    naming every provider tried; `.provider` is the last one."""
    last_name, last = errors[-1]
    tried = ", ".join(f"{name!r} ({type(exc).__name__})" for name, exc in errors)
    message = f"All providers failed: {tried}."
    if isinstance(last, RateLimited):
        return type(last)(message, provider=last_name, retry_after=last.retry_after)
    try:
        return type(last)(message, provider=last_name)
    except TypeError:  # a subclass with its own constructor: keep the root class
        return ProviderError(message, provider=last_name)


class FallbackProvider:
    """Tries `providers` in order for each prompt; same protocol as one provider.

    `name` and `model` are the first provider's. Which provider answered is
    logged (INFO), as is each failure that led to the next one (WARNING); a
    shared instance can't carry it as state, since prompts run concurrently.
    Owns the providers: `aclose()` closes them all.
    """

    def __init__(
        self, providers: Sequence[Provider], *, logger: logging.Logger | None = None
    ) -> None:
        if not providers:
            raise ValueError("FallbackProvider needs at least one provider")
        self._providers = tuple(providers)
        self._log = logger or _log
        self.name = self._providers[0].name
        self.model = self._providers[0].model
        self.label = ", ".join(provider.name for provider in self._providers)

    @property
    def providers(self) -> tuple[Provider, ...]:
        return self._providers

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        """Yield the first provider's events that gets to text; see the module doc.

        Raises the failing provider's error once text went out, or, when all fail
        before any text, an error of the last one's class naming them all.
        """
        errors: list[tuple[str, ProviderError]] = []
        for index, provider in enumerate(self._providers):
            sent_text = False
            events = provider.stream(prompt)
            try:
                async for event in events:
                    sent_text = sent_text or (isinstance(event, TextDelta) and bool(event.text))
                    yield event
            except ProviderError as exc:
                if sent_text:
                    self._log.warning(
                        "provider %r failed mid-answer, not falling back: %s", provider.name, exc
                    )
                    raise
                errors.append((provider.name, exc))
                following = (
                    self._providers[index + 1].name if index + 1 < len(self._providers) else None
                )
                self._log.warning(
                    "provider %r failed before answering (%s: %s)%s",
                    provider.name,
                    type(exc).__name__,
                    exc,
                    f"; trying {following!r}" if following else "",
                )
                continue
            finally:
                # Closing us (or cancelling our consumer) must close the inner
                # stream now, not whenever the garbage collector gets to it.
                close = getattr(events, "aclose", None)
                if close is not None:
                    await close()
            self._log.info("provider %r answered (chain %r)", provider.name, self.name)
            return
        raise _all_failed(errors) from errors[-1][1]

    async def aclose(self) -> None:
        """Close every provider, even if closing one of them fails."""
        failures: list[BaseException] = []
        for provider in self._providers:
            try:
                await provider.aclose()
            except Exception as exc:  # keep closing the rest, report after
                failures.append(exc)
        if failures:
            raise failures[0]
