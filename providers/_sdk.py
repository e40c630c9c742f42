"""What the openai and anthropic SDKs share: a streamed POST with a body we
wrote, and one mapping of their exceptions into the `ProviderError` tree.

Both SDKs are generated from one template, so their clients take the same
`post(...)` and their exception classes run in parallel (`RateLimitError`,
`APITimeoutError`, `APIStatusError`, `APIConnectionError`). `SdkErrors` names
one SDK's set, plus the two places they differ: where a status error keeps
the server's reason, and how an error sent after the 200 arrives.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import httpx2

from chatbridge.providers._splice import Splice
from chatbridge.providers._wire import retry_after_seconds, status_detail, status_error
from chatbridge.providers.base import (
    MediaRejected,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)

StreamT = TypeVar("StreamT")


async def post_streamed(
    client: Any,
    path: str,
    request: dict[str, Any],
    media: Splice,
    *,
    cast_to: type[Any],
    stream_cls: type[StreamT],
) -> StreamT:
    """`request` POSTed to `path` through the SDK's own `client` (its retries,
    errors and stream parsing) as a stream, with the body written by `media`:
    the images' base64 goes out of the bytes the prompt holds instead of being
    encoded again by the SDK's JSON encoder."""
    body = media.body(request)
    stream = await client.post(
        path,
        cast_to=cast_to,
        content=body,
        options={"headers": {"Content-Length": str(len(body))}},
        stream=True,
        stream_cls=stream_cls,
    )
    return cast("StreamT", stream)


@dataclass(frozen=True, slots=True)
class SdkErrors:
    """One SDK's exception classes, and where the two SDKs differ.

    `reason` reads a status error's (type, message, code) from wherever the
    SDK keeps them. An error the server sends after the 200 went out comes as
    a status error below 400 (Anthropic) or as a bare `error_frame` (OpenAI's
    `APIError`); anything else is a failure nobody expected.
    """

    rate_limited: type[Exception]
    timed_out: type[Exception]
    status: type[Exception]
    connection: type[Exception]
    reason: Callable[[Any], tuple[object, object, object]]
    error_frame: type[Exception] | None = None


_REFUSED = (400, 413, 415, 422)  # with images or PDFs aboard: those were refused


@dataclass(frozen=True, slots=True)
class ErrorMapping:
    """Turns one provider entry's SDK and transport exceptions into the
    `ProviderError` tree: one sentence each, naming the entry, never with
    `secret` (the API key) in it."""

    sdk: SdkErrors
    name: str
    model: str
    timeout: float
    secret: str | None = field(repr=False)

    def __call__(self, exc: Exception, *, media: bool) -> ProviderError:
        """The error for `exc`; with `media` (images or PDFs in the request) a
        refused request is `MediaRejected`, so the caller can retry without."""
        who = f"Provider {self.name!r}"
        status: int | None = getattr(exc, "status_code", None)
        if isinstance(exc, self.sdk.status) and media and status in _REFUSED:
            return MediaRejected(
                f"{who} refused a request with images or files (HTTP {status}).",
                provider=self.name,
            )
        if isinstance(exc, self.sdk.rate_limited):
            return RateLimited(
                f"{who} is still rate limited (HTTP 429) after the SDK's retries.",
                provider=self.name,
                retry_after=retry_after_seconds(cast("Any", exc).response.headers),
            )
        if isinstance(exc, self.sdk.timed_out | httpx2.TimeoutException):
            return ProviderTimeout(
                f"{who} timed out waiting {self.timeout:g}s for data.", provider=self.name
            )
        if isinstance(exc, self.sdk.status) and status is not None:
            return self._status(exc, status)
        if isinstance(exc, json.JSONDecodeError):
            return ProviderUnavailable(f"{who} sent malformed stream data.", provider=self.name)
        if isinstance(exc, self.sdk.connection | httpx2.HTTPError | httpx2.StreamError):
            return ProviderUnavailable(f"{who} lost the connection.", provider=self.name)
        if self.sdk.error_frame is not None and isinstance(exc, self.sdk.error_frame):
            kind = getattr(exc, "type", None)
            named = isinstance(kind, str) and kind.replace("_", "").isalnum()
            return ProviderUnavailable(
                f"{who} reported an error mid-stream{f' ({kind})' if named else ''}.",
                provider=self.name,
            )
        return ProviderUnavailable(f"{who} failed unexpectedly.", provider=self.name)

    def _status(self, exc: Exception, status: int) -> ProviderError:
        """An HTTP error status the SDK gave up on, or an error after the 200."""
        error_type, message, code = self.sdk.reason(exc)
        if status < 400:
            detail = status_detail(status, error_type, message, self.secret)
            return ProviderUnavailable(
                f"Provider {self.name!r} reported an error mid-stream "
                f"({detail.removeprefix('HTTP 200 ')}).",
                provider=self.name,
            )
        return status_error(
            self.name,
            model=self.model,
            status=status,
            error_type=error_type,
            message=message,
            code=code,
            secret=self.secret,
        )
