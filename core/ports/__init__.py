"""The contracts between the engine and its edges, defined in core.

Platforms, providers and stores import these; core never imports them back (the
architecture test keeps it so). The groups:

- delivery (`Outbox`, `PlatformLimits`, `SentMessage`, `DeliveryError` tree):
  how an answer reaches a chat;
- platform (`Platform`, `MessageHandler`, `DirectHandler`,
  `PlatformContext`, `PlatformFactory`, `PlatformError` tree): what an
  adapter is, what it calls and how it is built;
- routes (`Route`, `WebRequest`, `WebResponse`): the webhook endpoints a
  platform declares and chatbridge's server mounts;
- provider (`Provider`, `Prompt`, stream events, `ProviderError` tree): how an
  answer is generated;
- media (`FileSource`, `Transcriber`, `MediaError` tree): attachments'
  bytes and voice transcripts;
- store (`core.ports.store`: `Store` and its parts, errors, leases): what
  chatbridge keeps; platforms see one part of it, `ChannelCursors` (where a
  platform that never redelivers keeps its place per channel).
"""

from chatbridge.core.ports.delivery import (
    DeliveryError,
    DeliveryRetry,
    Found,
    LivePreview,
    Outbox,
    Phase,
    PlatformLimits,
    PostedLookup,
    PreviewSource,
    SentMessage,
    delivery_phase,
    in_progress_phase,
)
from chatbridge.core.ports.media import (
    ByteSink,
    FetchFailed,
    FileSource,
    FileTooLarge,
    MediaError,
    Transcriber,
)
from chatbridge.core.ports.platform import (
    DirectHandler,
    MentionRule,
    MessageHandler,
    OutboxFactory,
    Platform,
    PlatformContext,
    PlatformError,
    PlatformFactory,
    PlatformStartFailed,
    always_mention,
)
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
from chatbridge.core.ports.routes import Route, WebHandler, WebRequest, WebResponse
from chatbridge.core.ports.store import ChannelCursors

__all__ = [
    "ByteSink",
    "ChannelCursors",
    "DeliveryError",
    "DeliveryRetry",
    "DirectHandler",
    "FetchFailed",
    "FileSource",
    "FileTooLarge",
    "Found",
    "InvalidRequest",
    "LivePreview",
    "MediaError",
    "MediaRejected",
    "MentionRule",
    "MessageHandler",
    "Outbox",
    "OutboxFactory",
    "Phase",
    "Platform",
    "PlatformContext",
    "PlatformError",
    "PlatformFactory",
    "PlatformLimits",
    "PlatformStartFailed",
    "PostedLookup",
    "PreviewSource",
    "Prompt",
    "Provider",
    "ProviderError",
    "ProviderMisconfigured",
    "ProviderTimeout",
    "ProviderUnavailable",
    "RateLimited",
    "Route",
    "SentMessage",
    "StreamEvent",
    "TextDelta",
    "Transcriber",
    "UsageReport",
    "WebHandler",
    "WebRequest",
    "WebResponse",
    "always_mention",
    "delivery_phase",
    "in_progress_phase",
]
