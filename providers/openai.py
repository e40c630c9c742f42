"""OpenAI Chat Completions, and any server that speaks it (Ollama, vLLM), as a `Provider`.

SDK exceptions stop here: everything `stream()` raises is a `ProviderError`
whose message names the config entry and never carries the API key.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx2
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam

from chatbridge.core.models import Turn, Usage
from chatbridge.providers._sdk import ErrorMapping, SdkErrors, post_streamed
from chatbridge.providers._splice import Splice
from chatbridge.providers._wire import PLACEHOLDER_KEY, media_accepted
from chatbridge.providers.base import (
    Prompt,
    ProviderUnavailable,
    StreamEvent,
    TextDelta,
    UsageReport,
)

log = logging.getLogger(__name__)

# What can escape the SDK while streaming: its own errors, raw transport errors
# from the body iterator, and the JSON error of a malformed `data:` line.
WIRE_ERRORS = (openai.OpenAIError, httpx2.HTTPError, httpx2.StreamError, json.JSONDecodeError)


def _reason(exc: openai.APIStatusError) -> tuple[object, object, object]:
    """The server's error type, message and code, from the body the SDK kept."""
    body = exc.body if isinstance(exc.body, dict) else {}
    return body.get("type"), body.get("message"), body.get("code")


# An `{"error": ...}` frame after the 200 went out comes as a bare `APIError`;
# any other error of the SDK's own that reaches the mapping is read the same way.
SDK_ERRORS = SdkErrors(
    rate_limited=openai.RateLimitError,
    timed_out=openai.APITimeoutError,
    status=openai.APIStatusError,
    connection=openai.APIConnectionError,
    reason=_reason,
    error_frame=openai.OpenAIError,
)


def is_openai_itself(base_url: str | None) -> bool:
    """OpenAI rejects `max_tokens` for its reasoning models and wants
    `max_completion_tokens`; compatible servers (Ollama, vLLM) reliably know
    only the older name. `None` is the SDK default, which is OpenAI."""
    return base_url is None or urlsplit(base_url).hostname == "api.openai.com"


class OpenAIProvider:
    """Streams Chat Completions through one `openai.AsyncOpenAI` client per instance.

    Retries and timeouts are the SDK's: `max_retries` covers 408/409/429/5xx and
    failed connections before the first byte (a stream never restarts once it
    began); `timeout` bounds each network wait (connect, every read gap), not the
    whole answer. `base_url=None` means the SDK default (OpenAI itself).
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
        self.accepts = media_accepted("openai", vision=vision, base_url=base_url)
        self._errors = ErrorMapping(
            SDK_ERRORS, name=name, model=model, timeout=timeout, secret=api_key
        )
        self._max_tokens = max_tokens
        self._compatible_server = not is_openai_itself(base_url)
        # Cleared for good when a compatible server rejects the parameter.
        self._sends_cache_key = True
        self._client = openai.AsyncOpenAI(
            api_key=api_key or PLACEHOLDER_KEY,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
        )

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        """Yield content deltas in order, then one `UsageReport` if the server sent usage.

        An empty system prompt is left out; any role but "assistant" is sent as
        "user". The messages are the prompt's turns as they are, so within a
        session each request starts with the previous one's messages byte for
        byte (what OpenAI's prompt cache matches), and `prompt.cache_key` goes
        out as `prompt_cache_key`. A compatible server that rejects that
        parameter (400/422 naming it) gets the request again without it, from
        then on. A stream that ends without a `finish_reason` is an error, not
        a short answer.
        """
        messages: list[ChatCompletionMessageParam] = []
        media = Splice()
        if prompt.system:  # some compatible servers reject an empty system message
            messages.append({"role": "system", "content": prompt.system})
        for turn in prompt.messages:
            if turn.role == "assistant":
                messages.append({"role": "assistant", "content": turn.content})
            else:
                messages.append({"role": "user", "content": self._user_content(turn, media)})
        has_media = any(t.parts for t in prompt.messages)
        usage: Usage | None = None
        finished = False
        try:
            chunks = await self._open(messages, prompt.cache_key, media)
            # `async with` closes the HTTP response on early exit and cancellation.
            async with chunks:
                async for chunk in chunks:
                    if chunk.usage is not None:
                        usage = _usage(chunk.usage)
                    for choice in chunk.choices:
                        finished = finished or choice.finish_reason is not None
                        if choice.delta is not None and choice.delta.content:
                            yield TextDelta(choice.delta.content)
        except WIRE_ERRORS as exc:
            raise self._errors(exc, media=has_media) from exc
        if not finished:
            raise ProviderUnavailable(
                f"Provider {self.name!r} ended its stream before a finish_reason.",
                provider=self.name,
            )
        if usage is not None:
            yield UsageReport(usage)

    def _user_content(self, turn: Turn, media: Splice) -> Any:
        """A plain string, or with images/PDFs a list of parts: the text first,
        then each image as a `data:` URL (never a platform URL), each PDF as a
        file input. Parts this entry cannot take are left out. The URLs are
        placeholders `media` fills in when it writes the request body."""
        parts = [p for p in turn.parts if p.kind in self._part_kinds()]
        if not parts:
            return turn.content
        content: list[dict[str, Any]] = []
        if turn.content.strip():
            content.append({"type": "text", "text": turn.content})
        for part in parts:
            url = media.url(part)
            if part.kind == "image":
                content.append({"type": "image_url", "image_url": {"url": url}})
            else:
                file = {"filename": part.name or "document.pdf", "file_data": url}
                content.append({"type": "file", "file": file})
        return content

    def _part_kinds(self) -> frozenset[str]:
        return self.accepts

    async def _open(
        self, messages: list[ChatCompletionMessageParam], cache_key: str, media: Splice
    ) -> Any:
        def create(key: str) -> Any:
            if media:
                return self._post_with_media(messages, key, media)
            return self._client.chat.completions.create(
                model=self.model,
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
                max_tokens=self._max_tokens if self._compatible_server else openai.omit,
                max_completion_tokens=openai.omit if self._compatible_server else self._max_tokens,
                prompt_cache_key=key or openai.omit,
            )

        if not (cache_key and self._sends_cache_key):
            return await create("")
        try:
            return await create(cache_key)
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            if not self._compatible_server or "prompt_cache_key" not in str(exc.message):
                raise
            self._sends_cache_key = False
            log.warning(
                "providers.%s: the server rejects prompt_cache_key; sending requests without it",
                self.name,
            )
            return await create("")

    async def _post_with_media(
        self, messages: list[ChatCompletionMessageParam], key: str, media: Splice
    ) -> Any:
        """The same request as `chat.completions.create` would send, through the
        SDK's own client (its retries, errors and stream parsing), with a body
        written here: the SDK's JSON encoder would hold a 10 MB image's base64
        three more times over (the data URL, the encoder's chunk, the joined
        text, the bytes); this body holds it once."""
        request: dict[str, Any] = {
            "messages": messages,
            "model": self.model,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tokens = "max_tokens" if self._compatible_server else "max_completion_tokens"
        request[tokens] = self._max_tokens
        if key:
            request["prompt_cache_key"] = key
        return await post_streamed(
            self._client,
            "/chat/completions",
            request,
            media,
            cast_to=ChatCompletion,
            stream_cls=openai.AsyncStream[ChatCompletionChunk],
        )

    async def aclose(self) -> None:
        """Close the client's connection pool; the instance is unusable afterwards."""
        await self._client.close()


def _usage(reported: Any) -> Usage:
    """The usage chunk as ours; `prompt_tokens` already counts the cached part."""
    details = getattr(reported, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    return Usage(reported.prompt_tokens, reported.completion_tokens, cached)
