"""Anthropic's Messages API as a `Provider`.

SDK exceptions stop here: everything `stream()` raises is a `ProviderError`
whose message names the config entry and never carries the API key.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

import anthropic
import httpx2
from anthropic.types import (
    Message,
    MessageParam,
    RawContentBlockDeltaEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
)
from anthropic.types import TextDelta as AnthropicTextDelta

from chatbridge.core.models import MediaPart, Turn, Usage
from chatbridge.providers._sdk import ErrorMapping, SdkErrors, post_streamed
from chatbridge.providers._splice import Splice
from chatbridge.providers._wire import PLACEHOLDER_KEY, media_accepted
from chatbridge.providers.base import (
    InvalidRequest,
    Prompt,
    ProviderUnavailable,
    StreamEvent,
    TextDelta,
    UsageReport,
)

# The SDK lets raw httpx2 errors out of a stream's body (a dropped connection,
# a read timeout mid-answer), and a malformed `data:` line as a JSONDecodeError.
WIRE_ERRORS = (anthropic.AnthropicError, httpx2.HTTPError, httpx2.StreamError, json.JSONDecodeError)


def _reason(exc: anthropic.APIStatusError) -> tuple[object, object, object]:
    """The SDK keeps the server's error type and message on the exception."""
    return exc.type, exc.api_message, None


# An `event: error` after the 200 went out (overloaded mid-answer) comes as a
# status error with the 200's status; the SDK has no other error of that kind.
SDK_ERRORS = SdkErrors(
    rate_limited=anthropic.RateLimitError,
    timed_out=anthropic.APITimeoutError,
    status=anthropic.APIStatusError,
    connection=anthropic.APIConnectionError,
    reason=_reason,
)


def alternate_roles(
    turns: Sequence[Turn],
    *,
    accepts: frozenset[str] = frozenset({"image", "document"}),
    splice: Splice | None = None,
) -> list[dict[str, Any]]:
    """Turns as Messages API messages: starting with "user", roles alternating.

    Empty turns are dropped (the API rejects empty text), leading assistant turns
    are dropped (a reply to nothing the model can see), consecutive same-role
    turns are merged with a blank line. Any role but "assistant" counts as "user".
    A turn with images or PDFs (of the kinds in `accepts`) becomes a list of
    content blocks, those first and the text last, as Anthropic advises.
    Returns [] when no user turn remains.
    """
    messages: list[dict[str, Any]] = []
    for turn in turns:
        role = "assistant" if turn.role == "assistant" else "user"
        blocks = (
            [_block(p, splice) for p in turn.parts if p.kind in accepts] if role == "user" else []
        )
        if not (turn.content.strip() or blocks) or (not messages and role == "assistant"):
            continue
        content: Any = turn.content
        if blocks:
            text = [{"type": "text", "text": turn.content}] if turn.content.strip() else []
            content = blocks + text
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] = _joined(messages[-1]["content"], content)
        else:
            messages.append({"role": role, "content": content})
    return messages


def _block(part: MediaPart, splice: Splice | None = None) -> dict[str, Any]:
    """An image or document content block with base64 data (never a URL);
    with `splice`, the data is its stand-in (see `providers._splice`)."""
    kind = "image" if part.kind == "image" else "document"
    data = splice.data(part) if splice is not None else part.data.decode("ascii")
    source = {"type": "base64", "media_type": part.mime, "data": data}
    return {"type": kind, "source": source}


def _joined(first: Any, second: Any) -> Any:
    """Two same-role contents as one: strings with a blank line, else blocks."""
    if isinstance(first, str) and isinstance(second, str):
        return first + "\n\n" + second

    def listed(content: Any) -> list[dict[str, Any]]:
        return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)

    return listed(first) + listed(second)


CACHE_BREAKPOINT = {"type": "ephemeral"}


def mark_cached(message: dict[str, Any]) -> dict[str, Any]:
    """`message` with a prompt-cache breakpoint on its last content block."""
    content = message["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    blocks[-1] = {**blocks[-1], "cache_control": CACHE_BREAKPOINT}
    return {**message, "content": blocks}


def cached_request(system: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The `system` and `messages` parameters with the stable prefix marked for caching.

    Two breakpoints (Anthropic allows four): the system prompt, and the newest
    message. Within a session every request starts with the previous one's
    messages, so the prefix a request writes (system prompt, earlier turns,
    the session's first message with its bridging block, the message it
    answers) is what the next request reads back: the cache looks back from a
    breakpoint for the longest prefix it holds, and only the newest answer and
    message are new. Prompts below the model's minimum (1,024 tokens or more)
    are simply not cached.
    """
    marked: list[dict[str, Any]] = list(messages)
    if marked:
        marked[-1] = mark_cached(marked[-1])
    extra: dict[str, Any] = {"messages": marked}
    if system:
        extra["system"] = [{"type": "text", "text": system, "cache_control": CACHE_BREAKPOINT}]
    return extra


class AnthropicProvider:
    """Streams Messages through one `anthropic.AsyncAnthropic` client per instance.

    Retries and timeouts are the SDK's: `max_retries` covers 408/409/429/5xx/529
    and failed connections before the first byte (a stream never restarts once it
    began); `timeout` bounds each network wait, not the whole answer.
    `base_url=None` means the SDK default (ANTHROPIC_BASE_URL, else Anthropic).
    """

    def __init__(
        self,
        name: str,
        *,
        model: str,
        api_key: str | None,
        base_url: str | None,
        timeout: float,
        max_retries: int,
        max_tokens: int,
        vision: bool = True,
    ) -> None:
        self.name = name
        self.label = name
        self.model = model
        self.accepts = media_accepted("anthropic", vision=vision, base_url=base_url)
        self._errors = ErrorMapping(
            SDK_ERRORS, name=name, model=model, timeout=timeout, secret=api_key
        )
        self._max_tokens = max_tokens
        # An explicit key, even a placeholder, stops the SDK from hunting for
        # credentials in the environment and in profile files on disk.
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key or PLACEHOLDER_KEY,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
        )

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        """Yield text deltas in order, then one `UsageReport`.

        The system prompt and the earlier turns are marked for prompt caching
        (`cached_request`). Input tokens (the cache's included) come from
        message_start, output tokens from message_delta. A stream that ends
        without message_stop is an error, not a short answer.
        """
        media = Splice()
        messages = alternate_roles(prompt.messages, accepts=self.accepts, splice=media)
        has_media = bool(media)
        if not messages:
            raise InvalidRequest(
                f"Provider {self.name!r} got a prompt without a user message.", provider=self.name
            )
        request = cached_request(prompt.system, messages)
        usage = Usage()
        output_tokens = 0
        stopped = False
        try:
            if media:
                events = await self._post_with_media(request, media)
            else:
                events = await self._client.messages.create(
                    model=self.model,
                    max_tokens=self._max_tokens,
                    messages=cast("list[MessageParam]", request.pop("messages")),
                    stream=True,
                    **request,
                )
            # `async with` closes the HTTP response on early exit and cancellation.
            async with events:
                async for event in events:
                    if isinstance(event, RawContentBlockDeltaEvent):
                        # Only text: thinking/tool deltas are not part of the answer.
                        if isinstance(event.delta, AnthropicTextDelta) and event.delta.text:
                            yield TextDelta(event.delta.text)
                    elif isinstance(event, RawMessageStartEvent):
                        usage = _input_usage(event.message.usage)
                    elif isinstance(event, RawMessageDeltaEvent):
                        output_tokens = event.usage.output_tokens
                    elif isinstance(event, RawMessageStopEvent):
                        stopped = True
        except WIRE_ERRORS as exc:
            raise self._errors(exc, media=has_media) from exc
        if not stopped:
            raise ProviderUnavailable(
                f"Provider {self.name!r} ended its stream before message_stop.",
                provider=self.name,
            )
        yield UsageReport(Usage(usage.input_tokens, output_tokens, usage.cached_input_tokens))

    async def _post_with_media(
        self, request: dict[str, Any], media: Splice
    ) -> anthropic.AsyncStream[RawMessageStreamEvent]:
        """The request `messages.create` would send, with the body written by
        `media` (see `post_streamed`)."""
        return await post_streamed(
            self._client,
            "/v1/messages",
            {"max_tokens": self._max_tokens, "model": self.model, "stream": True, **request},
            media,
            cast_to=Message,
            stream_cls=anthropic.AsyncStream[RawMessageStreamEvent],
        )

    async def aclose(self) -> None:
        """Close the client's connection pool; the instance is unusable afterwards."""
        await self._client.close()


def _input_usage(reported: Any) -> Usage:
    """message_start's usage as ours: Anthropic's `input_tokens` excludes the
    tokens written to and read from the cache; ours counts the whole prompt."""
    fresh = reported.input_tokens or 0
    written = getattr(reported, "cache_creation_input_tokens", None) or 0
    read = getattr(reported, "cache_read_input_tokens", None) or 0
    return Usage(fresh + written + read, 0, read)
