"""What every provider is: a `Prompt` in, an async stream of deltas and usage out.

Error tree (SDK exceptions are mapped into it at the provider boundary,
`raise ... from exc`)::

    ProviderError
    ├── RateLimited(retry_after)   429 after the SDK's own retries
    ├── ProviderTimeout            connect/read timeout, 408
    ├── ProviderUnavailable        5xx, 529 overloaded, 409, dropped or malformed stream
    └── InvalidRequest             a prompt we should never have built
        ├── MediaRejected          the request carried images/documents and was refused
        │                          (a server without vision, a corrupt image)
        └── ProviderMisconfigured(reason, setting)
                                   401/403/404/400 and other 4xx: a bad key, no
                                   permission, unknown model, rejected request

Only `ProviderMisconfigured` needs the admin: retrying will not help, and its
message says which config key to check. Users hear "try again" for the rest.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "InvalidRequest",
    "MediaRejected",
    "Prompt",
    "Provider",
    "ProviderError",
    "ProviderMisconfigured",
    "ProviderTimeout",
    "ProviderUnavailable",
    "RateLimited",
    "StreamEvent",
    "TextDelta",
    "UsageReport",
]

from chatbridge.core.models import Turn, Usage


@dataclass(frozen=True, slots=True)
class Prompt:
    """What the LLM sees: a system prompt and alternating user/assistant turns.

    `cache_key` names the conversation for the provider's prompt cache (OpenAI's
    `prompt_cache_key` routes requests sharing a prefix to the same cache); it
    is `cache_key_for(conversation key)`, a hash, so no user ID leaves the bot.
    "" sends none.
    """

    system: str
    messages: tuple[Turn, ...]
    cache_key: str = ""

    @staticmethod
    @functools.lru_cache(maxsize=4096)
    def cache_key_for(conversation_key: str) -> str:
        """A stable, opaque key per conversation: the same key for every request of
        one conversation, different keys for different conversations."""
        digest = hashlib.sha256(f"chatbridge-prompt-cache:{conversation_key}".encode())
        return f"cb-{digest.hexdigest()[:32]}"


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class UsageReport:
    """`provider` names the config entry that used it ("" : the provider
    streaming it); a fallback chain fills it in, so each entry's usage is
    settled at its own prices."""

    usage: Usage
    provider: str = ""


StreamEvent = TextDelta | UsageReport


class Provider(Protocol):
    """A configured LLM endpoint. One instance (and one SDK client) per config entry."""

    name: str
    model: str
    label: str
    """The config entries it may answer from, for notices: "main", or
    "main, backup" for a fallback chain."""

    def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        """Yield text deltas in order, then at most one `UsageReport`.

        Raises a `ProviderError` subclass; cancelling the consumer closes the
        underlying HTTP stream.
        """
        ...

    async def aclose(self) -> None: ...


class ProviderError(Exception):
    """Root of provider failures; `provider` names the config entry that failed."""

    def __init__(self, message: str, *, provider: str = "") -> None:
        super().__init__(message)
        self.provider = provider


class RateLimited(ProviderError):
    def __init__(
        self, message: str, *, provider: str = "", retry_after: float | None = None
    ) -> None:
        super().__init__(message, provider=provider)
        self.retry_after = retry_after


class ProviderTimeout(ProviderError):
    pass


class ProviderUnavailable(ProviderError):
    pass


class InvalidRequest(ProviderError):
    pass


class MediaRejected(InvalidRequest):
    """The provider refused a request carrying images or documents (HTTP 400/415/422).

    Core asks again without them and tells the user in one sentence.
    """


class ProviderMisconfigured(InvalidRequest):
    """The provider refused the entry as configured; only the admin can fix it.

    The message is the admin's one line, e.g. ``providers.main: the API key was
    rejected (HTTP 401); check providers.main.api_key.``; it never carries the
    key. `reason` is "auth" (401), "permission" (402/403), "model" (404 naming
    the model), "endpoint" (404 otherwise) or "request" (400 and other 4xx);
    `setting` is the config key path to check.
    """

    def __init__(self, message: str, *, provider: str = "", reason: str, setting: str) -> None:
        super().__init__(message, provider=provider)
        self.reason = reason
        self.setting = setting
