"""A fake Anthropic Messages endpoint (`POST /v1/messages`).

Streams named events like the real API: message_start (input tokens),
content_block_start, content_block_delta text_delta..., content_block_stop,
message_delta (stop_reason, output tokens), message_stop; optional pings.
Accepts the key as `x-api-key` or `Authorization: Bearer`.

Prompt caching as Anthropic does it, simplified: a block with `cache_control`
is a breakpoint; the prompt up to each breakpoint (system blocks, then the
messages' blocks, `cache_control` itself not part of it) is written to the
cache, and the longest prefix an earlier request wrote that this request
starts with (up to its last breakpoint) is read from it. message_start
reports them as `cache_read_input_tokens` / `cache_creation_input_tokens`,
and `input_tokens` as the rest, in words (no minimum length, no expiry).
More than four breakpoints get a 400, as from the real API.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from tests.support.sse import Body, FakeSSEServer, Fault, Frames, sse

OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
MAX_BREAKPOINTS = 4
IMAGE_TOKENS = 1_398
"""What the fake counts per image block: Anthropic's width x height / 750 for
a 1024x1024 image, the prompt's other tokens being its words."""


def _blocks(body: Body) -> list[tuple[str, Body]]:
    """(role, block) for the system prompt and every message, in prompt order."""

    def as_blocks(content: Any) -> list[Body]:
        if isinstance(content, str):
            return [{"type": "text", "text": content}] if content else []
        return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []

    found = [("system", b) for b in as_blocks(body.get("system", ""))]
    for message in body.get("messages", []):
        found += [(str(message.get("role")), b) for b in as_blocks(message.get("content"))]
    return found


def _key(role: str, block: Body) -> str:
    return role + json.dumps({k: v for k, v in block.items() if k != "cache_control"},
                             sort_keys=True)  # fmt: skip


def _text_words(block: Body) -> int:
    return len(str(block.get("text", "")).split())


class FakeAnthropic(FakeSSEServer):
    path = "/v1/messages"

    def __init__(
        self,
        *,
        ping: bool = True,
        default_text: str = "Hello from the fake.",
        chunk_chars: int = 4,
        api_key: str | None = None,
    ) -> None:
        super().__init__(default_text=default_text, chunk_chars=chunk_chars, api_key=api_key)
        self.ping = ping  # real streams carry pings; the SDK must skip them
        self.cached: set[tuple[str, ...]] = set()  # prefixes written to the prompt cache

    def breakpoints(self, body: Body) -> int:
        return sum(1 for _, block in _blocks(body) if "cache_control" in block)

    def refused(self, body: Body) -> Fault | None:
        found = self.breakpoints(body)
        if found > MAX_BREAKPOINTS:
            message = f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided."
            return Fault.status_error(400, "invalid_request_error", f"{message} Found {found}.")
        return None

    def cache_use(self, body: Body) -> tuple[int, int]:
        """(words read from the cache, words written to it) for this request."""
        blocks = _blocks(body)
        keys = [_key(role, block) for role, block in blocks]
        marks = [i + 1 for i, (_, block) in enumerate(blocks) if "cache_control" in block]
        if not marks:
            return 0, 0
        hit = max((n for n in range(1, marks[-1] + 1) if tuple(keys[:n]) in self.cached),
                  default=0)  # fmt: skip
        for end in marks:
            self.cached.add(tuple(keys[:end]))
        read = sum(_text_words(block) for _, block in blocks[:hit])
        upto = sum(_text_words(block) for _, block in blocks[: marks[-1]])
        return read, max(0, upto - read)

    def presented_key(self, request: web.Request) -> str:
        return request.headers.get("x-api-key") or super().presented_key(request)

    def _message(self, body: Body, content: list[Body], usage: Body, stop: str | None) -> Body:
        return {
            "id": f"msg_fake{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake-model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }

    def frames(self, body: Body, chunks: list[str], usage: tuple[int, int]) -> Frames:
        prompt, completion = usage
        read, written = self.cache_use(body)
        read, written = min(read, prompt), min(written, max(0, prompt - read))
        counts = {
            "input_tokens": prompt - read - written,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "output_tokens": 1,
        }
        start = self._message(body, [], counts, None)
        head = [sse({"type": "message_start", "message": start}, "message_start")]
        if self.ping:
            head.append(sse({"type": "ping"}, "ping"))
        block = {"type": "text", "text": ""}
        head.append(
            sse(
                {"type": "content_block_start", "index": 0, "content_block": block},
                "content_block_start",
            )
        )
        deltas = [
            sse(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": text},
                },
                "content_block_delta",
            )
            for text in chunks
        ]
        message_delta = {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": completion},
        }
        tail = [
            sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            sse(message_delta, "message_delta"),
            sse({"type": "message_stop"}, "message_stop"),
        ]
        return Frames(head, deltas, tail)

    def error_body(self, fault: Fault) -> Body:
        return {"type": "error", "error": {"type": fault.error_type, "message": fault.message}}

    def stream_error_frame(self) -> bytes:
        return sse(OVERLOADED, "error")

    def malformed_frame(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type": "content_block_delta", "ind\n\n'

    def completion(self, body: Body, text: str, usage: tuple[int, int]) -> Body:
        prompt, completion = usage
        content = [{"type": "text", "text": text}]
        counts = {"input_tokens": prompt, "output_tokens": completion}
        return self._message(body, content, counts, "end_turn")

    def prompt_words(self, body: Body) -> int:
        def words(content: object) -> int:
            if isinstance(content, str):
                return len(content.split())
            if isinstance(content, list):
                images = sum(1 for block in content if block.get("type") == "image")
                text = sum(words(block.get("text", "")) for block in content)
                return text + IMAGE_TOKENS * images
            return 0

        system = words(body.get("system", ""))
        return system + sum(words(m.get("content", "")) for m in body.get("messages", []))
