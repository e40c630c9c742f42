"""What a platform adapter provides to the engine (defined in `chatbridge.core.ports`).

An adapter only translates: SDK event -> `IncomingMessage` ->
`await handler.accept(msg)`; `Platform.outbox(msg)` turns the engine's reply
back into SDK calls. No session, memory or provider logic lives in `platforms/`.
"""

from chatbridge.core.ports import (
    DeliveryError,
    DeliveryRetry,
    Found,
    LivePreview,
    MessageHandler,
    Outbox,
    Platform,
    PlatformError,
    PlatformLimits,
    PlatformStartFailed,
    PostedLookup,
    PreviewSource,
    SentMessage,
)

__all__ = [
    "DeliveryError",
    "DeliveryRetry",
    "Found",
    "LivePreview",
    "MessageHandler",
    "Outbox",
    "Platform",
    "PlatformError",
    "PlatformLimits",
    "PlatformStartFailed",
    "PostedLookup",
    "PreviewSource",
    "SentMessage",
]
