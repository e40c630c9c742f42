"""A chain of providers that looks like one: the next answers when one fails early.

"Early" means before any text reached the consumer. Once text went out, a
failure propagates: stitching a second model's answer onto a half-finished
first one would read as one garbled reply. A misconfigured provider (bad key,
unknown model) falls back like any other: that is what a backup is for.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence

from chatbridge.providers.base import (
    Prompt,
    Provider,
    ProviderError,
    ProviderMisconfigured,
    RateLimited,
    StreamEvent,
    TextDelta,
    UsageReport,
)

_log = logging.getLogger(__name__)


def _all_failed(
    errors: Sequence[tuple[str, ProviderError]],
) -> tuple[ProviderError, ProviderError]:
    """One error for a chain that failed before any text, naming every provider
    tried, and the error it stands for (to raise it `from`).

    If every provider is misconfigured: a `ProviderMisconfigured` joining each
    one's fix, with the last one's `reason` and `setting`, since only the admin
    can help. Else the class of the last error that may pass on its own (so
    callers can still branch on it, and the user hears "try again");
    `.provider` is the provider that error came from.
    """
    misconfigured = [exc for _, exc in errors if isinstance(exc, ProviderMisconfigured)]
    if len(misconfigured) == len(errors):
        last = misconfigured[-1]
        error = ProviderMisconfigured(
            f"All providers are misconfigured: {' '.join(map(str, misconfigured))}",
            provider=last.provider or errors[-1][0],
            reason=last.reason,
            setting=last.setting,
        )
        return error, last
    name, cause = next(
        (name, exc) for name, exc in reversed(errors) if not isinstance(exc, ProviderMisconfigured)
    )
    tried = ", ".join(f"{who!r} ({type(exc).__name__})" for who, exc in errors)
    message = f"All providers failed: {tried}."
    if isinstance(cause, RateLimited):
        return type(cause)(message, provider=name, retry_after=cause.retry_after), cause
    try:
        return type(cause)(message, provider=name), cause
    except TypeError:  # a subclass with its own constructor: keep the root class
        return ProviderError(message, provider=name), cause


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
        self.accepts: frozenset[str] = getattr(self._providers[0], "accepts", frozenset())

    @property
    def providers(self) -> tuple[Provider, ...]:
        return self._providers

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        """Yield the first provider's events that gets to text; see the module doc.

        Raises the failing provider's error once text went out, or, when all fail
        before any text, the error `_all_failed` picks: `ProviderMisconfigured`
        only if every provider was misconfigured.
        """
        errors: list[tuple[str, ProviderError]] = []
        for index, provider in enumerate(self._providers):
            sent_text = False
            events = provider.stream(prompt)
            try:
                async for event in events:
                    sent_text = sent_text or (isinstance(event, TextDelta) and bool(event.text))
                    if isinstance(event, UsageReport) and not event.provider:
                        event = UsageReport(event.usage, provider=provider.name)
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
        error, cause = _all_failed(errors)
        raise error from cause

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
