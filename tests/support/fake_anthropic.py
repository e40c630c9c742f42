"""A fake Anthropic Messages endpoint (`POST /v1/messages`).

Streams named events like the real API: message_start (input tokens),
content_block_start, content_block_delta text_delta..., content_block_stop,
message_delta (stop_reason, output tokens), message_stop; optional pings.
Accepts the key as `x-api-key` or `Authorization: Bearer`.
"""

from __future__ import annotations

from aiohttp import web

from tests.support.sse import Body, FakeSSEServer, Fault, Frames, sse

OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


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
        start = self._message(body, [], {"input_tokens": prompt, "output_tokens": 1}, None)
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
                return sum(words(block.get("text", "")) for block in content)
            return 0

        system = words(body.get("system", ""))
        return system + sum(words(m.get("content", "")) for m in body.get("messages", []))
