"""A fake OpenAI Chat Completions endpoint (`POST /v1/chat/completions`).

Streams chunks shaped like the real API: a role chunk, content chunks, a
`finish_reason: "stop"` chunk, a usage chunk with `choices: []` when
`stream_options.include_usage` is set, then `data: [DONE]`.

Prompt caching as OpenAI does it, simplified: requests sharing a
`prompt_cache_key` are routed to one cache, and a request whose messages
start with an earlier request's messages, byte for byte, reports those as
`usage.prompt_tokens_details.cached_tokens` (counted in words, like the
prompt; the real API's 1,024-token minimum is left out).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass

from aiohttp import web

from tests.support.sse import Body, FakeSSEServer, Fault, Frames, sse

CREATED = 1_700_000_000
IMAGE_TOKENS = 765
"""What the fake counts per image part: gpt-4o's count for a 1024x1024 image
(high detail), the prompt's other tokens being its words."""


def _words(messages: list[Body]) -> int:
    return sum(len(_text_of(m.get("content", "")).split()) for m in messages)


def _text_of(content: object) -> str:
    """A message's text: the content string, or its text parts (images don't count)."""
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


@dataclass(frozen=True, slots=True)
class Transcription:
    """One `POST /v1/audio/transcriptions` as the fake saw it (multipart form)."""

    model: str
    filename: str
    content_type: str
    data: bytes
    authorization: str


class FakeOpenAI(FakeSSEServer):
    path = "/v1/chat/completions"
    reject_images = False  # an OpenAI-compatible server without vision: 400 on image parts

    def __init__(
        self,
        *,
        default_text: str = "Hello from the fake.",
        chunk_chars: int = 4,
        api_key: str | None = None,
    ) -> None:
        super().__init__(default_text=default_text, chunk_chars=chunk_chars, api_key=api_key)
        self._cached: dict[str, list[list[str]]] = {}  # cache key -> earlier prompts
        self.transcriptions: list[Transcription] = []
        self.transcripts: deque[str] = deque()  # scripted texts; default "Hallo."

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)

    async def _transcribe(self, request: web.Request) -> web.Response:
        """Like OpenAI: a multipart form with `model` and `file`; JSON `{text, usage}`."""
        if self.api_key is not None and self.presented_key(request) != self.api_key:
            error = {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                     "param": None, "code": "invalid_api_key"}  # fmt: skip
            return web.json_response({"error": error}, status=401)
        form = await request.post()
        upload, model = form.get("file"), form.get("model")
        if not isinstance(upload, web.FileField) or not isinstance(model, str):
            error = {"message": "file and model are required", "type": "invalid_request_error",
                     "param": "file", "code": None}  # fmt: skip
            return web.json_response({"error": error}, status=400)
        data = upload.file.read()
        self.transcriptions.append(
            Transcription(model, upload.filename, upload.content_type, data,
                          request.headers.get("Authorization", ""))
        )  # fmt: skip
        text = self.transcripts.popleft() if self.transcripts else "Hallo."
        usage = {"type": "tokens", "input_tokens": 14, "output_tokens": len(text.split()),
                 "total_tokens": 14 + len(text.split()),
                 "input_token_details": {"text_tokens": 0, "audio_tokens": 14}}  # fmt: skip
        return web.json_response({"text": text, "usage": usage})

    def refused(self, body: Body) -> Fault | None:
        if self.reject_images and any(
            isinstance(m.get("content"), list)
            and any(p.get("type") == "image_url" for p in m["content"])
            for m in body.get("messages", [])
        ):
            return Fault.status_error(
                400, "invalid_request_error", "Invalid content type. image_url is only supported "
                "by certain models."
            )  # fmt: skip
        return None

    def cached_words(self, body: Body) -> int:
        """Words of the longest earlier prompt (same key) this one starts with."""
        key = body.get("prompt_cache_key")
        messages = [json.dumps(m, sort_keys=True) for m in body.get("messages", [])]
        if not isinstance(key, str) or not key:
            return 0
        earlier = self._cached.setdefault(key, [])
        best = [p for p in earlier if messages[: len(p)] == p]
        earlier.append(messages)
        longest = max(best, key=len, default=[])
        return _words([json.loads(m) for m in longest])

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
        cached = self.cached_words(body)
        if (body.get("stream_options") or {}).get("include_usage"):
            prompt, completion = usage
            counts = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": min(cached, prompt)},
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
        """The prompt's words, plus `IMAGE_TOKENS` per image (as OpenAI counts
        image tokens into `prompt_tokens`)."""
        messages = body.get("messages", [])
        images = sum(
            1
            for m in messages
            if isinstance(m.get("content"), list)
            for p in m["content"]
            if isinstance(p, dict) and p.get("type") == "image_url"
        )
        return _words(messages) + IMAGE_TOKENS * images
