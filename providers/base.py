"""What every provider is (defined in `chatbridge.core.ports.provider`).

A `Prompt` in, an async stream of `TextDelta`s and at most one `UsageReport`
out; SDK errors mapped into the `ProviderError` tree at the boundary.
"""

from chatbridge.core.ports.provider import (
    InvalidRequest,
    MediaRejected,
    Prompt,
    Provider,
    ProviderError,
    ProviderMisconfigured,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    StreamEvent,
    TextDelta,
    UsageReport,
)

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
