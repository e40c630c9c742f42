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
from chatbridge.providers._splice import Splice
from chatbridge.providers._wire import (
    PLACEHOLDER_KEY,
    media_accepted,
    retry_after_seconds,
    status_detail,
    status_error,
)
from chatbridge.providers.base import (
    InvalidRequest,
    MediaRejected,
    Prompt,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    StreamEvent,
    TextDelta,
    UsageReport,
)

# The SDK lets raw httpx2 errors out of a stream's body (a dropped connection,
# a read timeout mid-answer), and a malformed `data:` line as a JSONDecodeError.
WIRE_ERRORS = (anthropic.AnthropicError, httpx2.HTTPError, httpx2.StreamError, json.JSONDecodeError)


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
_REFUSED = (400, 413, 415, 422)  # with images or PDFs aboard: those were refused


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
        self._secret = api_key
        self._timeout = timeout
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
            status = getattr(exc, "status_code", None)
            if has_media and isinstance(exc, anthropic.APIStatusError) and status in _REFUSED:
                raise MediaRejected(
                    f"Provider {self.name!r} refused a request with images or files "
                    f"(HTTP {status}).",
                    provider=self.name,
                ) from exc
            raise self._mapped(exc) from exc
        if not stopped:
            raise ProviderUnavailable(
                f"Provider {self.name!r} ended its stream before message_stop.",
                provider=self.name,
            )
        yield UsageReport(Usage(usage.input_tokens, output_tokens, usage.cached_input_tokens))

    async def _post_with_media(
        self, request: dict[str, Any], media: Splice
    ) -> anthropic.AsyncStream[RawMessageStreamEvent]:
        """The request `messages.create` would send, through the SDK's own
        client (its retries, errors and event parsing), with the body written
        by `media`: the images' base64 goes out of the bytes the prompt holds
        instead of being decoded to text and encoded again by the SDK."""
        body = media.body(
            {"max_tokens": self._max_tokens, "model": self.model, "stream": True, **request}
        )
        return await self._client.post(
            "/v1/messages",
            cast_to=Message,
            content=body,
            options={"headers": {"Content-Length": str(len(body))}},
            stream=True,
            stream_cls=anthropic.AsyncStream[RawMessageStreamEvent],
        )

    def _mapped(self, exc: Exception) -> ProviderError:
        """The `ProviderError` for an SDK/transport exception; one sentence each."""
        who = f"Provider {self.name!r}"
        if isinstance(exc, anthropic.RateLimitError):
            return RateLimited(
                f"{who} is still rate limited (HTTP 429) after the SDK's retries.",
                provider=self.name,
                retry_after=retry_after_seconds(exc.response.headers),
            )
        if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
            return ProviderTimeout(
                f"{who} timed out waiting {self._timeout:g}s for data.", provider=self.name
            )
        if isinstance(exc, anthropic.APIStatusError):
            detail = status_detail(exc.status_code, exc.type, exc.api_message, self._secret)
            if exc.status_code < 400:
                # An `event: error` after the 200 went out (overloaded mid-answer).
                return ProviderUnavailable(
                    f"{who} reported an error mid-stream ({detail.removeprefix('HTTP 200 ')}).",
                    provider=self.name,
                )
            return status_error(
                self.name,
                model=self.model,
                status=exc.status_code,
                error_type=exc.type,
                message=exc.api_message,
                secret=self._secret,
            )
        if isinstance(exc, json.JSONDecodeError):
            return ProviderUnavailable(f"{who} sent malformed stream data.", provider=self.name)
        if isinstance(exc, anthropic.APIConnectionError | httpx2.HTTPError | httpx2.StreamError):
            return ProviderUnavailable(f"{who} lost the connection.", provider=self.name)
        return ProviderUnavailable(f"{who} failed unexpectedly.", provider=self.name)

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
