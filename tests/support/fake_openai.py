"""A fake OpenAI Chat Completions endpoint (`POST /v1/chat/completions`).

Streams chunks shaped like the real API: a role chunk, content chunks, a
`finish_reason: "stop"` chunk, a usage chunk with `choices: []` when
`stream_options.include_usage` is set, then `data: [DONE]`.
"""

from __future__ import annotations

from tests.support.sse import Body, FakeSSEServer, Fault, Frames, sse

CREATED = 1_700_000_000


class FakeOpenAI(FakeSSEServer):
    path = "/v1/chat/completions"

    @property
    def base_url(self) -> str:
        """What to give the SDK: it appends `chat/completions` itself."""
        return f"http://127.0.0.1:{self.port}/v1"

    def _chunk(self, body: Body, choices: list[Body], **extra: object) -> Body:
        return {
            "id": f"chatcmpl-fake{len(self.requests)}",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": body.get("model", "fake-model"),
            "system_fingerprint": None,
            "choices": choices,
            **extra,
        }

    def frames(self, body: Body, chunks: list[str], usage: tuple[int, int]) -> Frames:
        def choice(delta: Body, finish: str | None = None) -> list[Body]:
            return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

        head = [sse(self._chunk(body, choice({"role": "assistant", "content": ""})))]
        deltas = [sse(self._chunk(body, choice({"content": text}))) for text in chunks]
        tail = [sse(self._chunk(body, choice({}, "stop")))]
        if (body.get("stream_options") or {}).get("include_usage"):
            prompt, completion = usage
            counts = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            tail.append(sse(self._chunk(body, [], usage=counts)))
        tail.append(b"data: [DONE]\n\n")
        return Frames(head, deltas, tail)

    def error_body(self, fault: Fault) -> Body:
        code = {429: "rate_limit_exceeded", 401: "invalid_api_key"}.get(fault.status)
        return {
            "error": {
                "message": fault.message,
                "type": fault.error_type,
                "param": None,
                "code": code,
            }
        }

    def stream_error_frame(self) -> bytes:
        # What OpenAI sends when generation fails after the 200 went out.
        return sse({"error": {"message": "The server had an error", "type": "server_error"}})

    def completion(self, body: Body, text: str, usage: tuple[int, int]) -> Body:
        prompt, completion = usage
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": CREATED,
            "model": body.get("model", "fake-model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def prompt_words(self, body: Body) -> int:
        return sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
