"""What the fake LLM servers share: scripted steps, a request log and SSE framing.

A fake answers each request with the next scripted step (`Reply` or `Fault`),
or with a default `Reply()` once the script is empty. Subclasses only say how
their API spells frames; this module decides when to write, stall, cut or drop.
"""

from __future__ import annotations

import asyncio
import enum
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiohttp import web

Body = dict[str, Any]


def sse(data: object, event: str | None = None) -> bytes:
    """One SSE frame; `data` is JSON-encoded unless it is already a string."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


class FaultKind(enum.StrEnum):
    STATUS = "status"  # a plain HTTP error with the API's JSON error body
    SLOW_HEADERS = "slow_headers"  # sleep before sending anything, then answer normally
    DROP = "drop"  # some deltas, then close the socket without ending the chunked body
    MALFORMED = "malformed"  # some deltas, then a `data:` line with broken JSON
    TRUNCATE = "truncate"  # some deltas, then a clean end without the closing frames
    STREAM_ERROR = "stream_error"  # some deltas, then the API's in-stream error frame


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind
    status: int = 500
    error_type: str = "api_error"
    message: str = "Internal server error"
    retry_after: float | None = None
    delay: float = 0.0
    after_chunks: int = 1

    @classmethod
    def status_error(
        cls, status: int, error_type: str, message: str, retry_after: float | None = None
    ) -> Fault:
        return cls(FaultKind.STATUS, status, error_type, message, retry_after)

    @classmethod
    def rate_limit(cls, retry_after: float | None = 0.01) -> Fault:
        """429; `retry_after` goes out as both `retry-after` and `retry-after-ms`."""
        return cls(FaultKind.STATUS, 429, "rate_limit_error", "Rate limited", retry_after)

    @classmethod
    def server_error(cls, status: int = 500, retry_after: float | None = None) -> Fault:
        """A 5xx; a small `retry_after` keeps the SDK's retry backoff out of tests."""
        return cls.status_error(status, "api_error", "Internal server error", retry_after)

    @classmethod
    def overloaded(cls, retry_after: float | None = None) -> Fault:
        return cls.status_error(529, "overloaded_error", "Overloaded", retry_after)

    @classmethod
    def slow_first_byte(cls, delay: float) -> Fault:
        return cls(FaultKind.SLOW_HEADERS, delay=delay)

    @classmethod
    def drop_mid_stream(cls, after_chunks: int = 2) -> Fault:
        return cls(FaultKind.DROP, after_chunks=after_chunks)

    @classmethod
    def malformed(cls, after_chunks: int = 1) -> Fault:
        return cls(FaultKind.MALFORMED, after_chunks=after_chunks)

    @classmethod
    def truncated(cls, after_chunks: int = 2) -> Fault:
        return cls(FaultKind.TRUNCATE, after_chunks=after_chunks)

    @classmethod
    def stream_error(cls, after_chunks: int = 1) -> Fault:
        return cls(FaultKind.STREAM_ERROR, after_chunks=after_chunks)


@dataclass(frozen=True, slots=True)
class Reply:
    """A normal answer; `text` may be a function of the request body."""

    text: str | Callable[[Body], str] | None = None  # None: the server's default text
    chunk_chars: int | None = None  # None: the server's default chunk size
    first_chunk_delay: float = 0.0  # after the headers, before the first delta
    chunk_delay: float = 0.0  # between deltas
    usage: tuple[int, int] | None = None  # None: (words in the prompt, number of deltas)


Step = Reply | Fault


@dataclass(slots=True)
class Recorded:
    """One request as the fake saw it (header names lowercased); `server_seconds`
    spans handler entry to last byte written."""

    body: Body
    headers: dict[str, str]
    server_seconds: float = 0.0
    deltas: int = 0  # text deltas the answer was cut into (what a stream sends)


@dataclass(slots=True)
class Frames:
    head: list[bytes]
    deltas: list[bytes]
    tail: list[bytes]


@dataclass(slots=True)
class StreamCounters:
    open: int = 0  # responses currently being written
    closed_by_client: int = 0  # streams the client hung up on before the end
    completed: int = 0  # streams written to their (possibly faulty) end
    _changed: asyncio.Event = field(default_factory=asyncio.Event)


class FakeSSEServer:
    """An aiohttp app on 127.0.0.1:0; use as `async with Fake() as fake:`."""

    path = "/"

    def __init__(
        self,
        *,
        default_text: str = "Hello from the fake.",
        chunk_chars: int = 4,
        api_key: str | None = None,
    ) -> None:
        self.default_text = default_text
        self.chunk_chars = chunk_chars
        self.api_key = api_key  # when set, other keys get a 401 that echoes them back
        self.requests: list[Recorded] = []
        self.streams = StreamCounters()
        self._steps: deque[Step] = deque()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- what subclasses spell -------------------------------------------------
    def frames(self, body: Body, chunks: list[str], usage: tuple[int, int]) -> Frames:
        raise NotImplementedError

    def error_body(self, fault: Fault) -> Body:
        raise NotImplementedError

    def stream_error_frame(self) -> bytes:
        raise NotImplementedError

    def malformed_frame(self) -> bytes:
        return b'data: {"id": "broken", "choices": [\n\n'

    def completion(self, body: Body, text: str, usage: tuple[int, int]) -> Body:
        raise NotImplementedError

    def presented_key(self, request: web.Request) -> str:
        return request.headers.get("Authorization", "").removeprefix("Bearer ")

    def prompt_words(self, body: Body) -> int:
        raise NotImplementedError

    def add_routes(self, app: web.Application) -> None:
        """More endpoints of the same API (a subclass's), besides `path`."""

    def refused(self, body: Body) -> Fault | None:
        """The 4xx the API answers for a request it rejects; None: accepted."""
        return None

    # --- public knobs ----------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def open_streams(self) -> int:
        return self.streams.open

    def script(self, *steps: Step) -> None:
        """Queue steps for the next requests, in order."""
        self._steps.extend(steps)

    async def wait_idle(self, within: float = 30.0) -> bool:
        """True once no stream is open, False if that took longer than `within` s
        (a hang detector: whether a stream was cut or ran out is in `streams`)."""
        return await self.wait_streams(0, within=within)

    async def wait_streams(self, count: int, within: float = 30.0) -> bool:
        """True once exactly `count` streams are open, False after `within` s."""
        try:
            async with asyncio.timeout(within):
                while self.streams.open != count:
                    self.streams._changed.clear()
                    await self.streams._changed.wait()
        except TimeoutError:
            return False
        return True

    async def __aenter__(self) -> Self:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post(self.path, self._handle)
        self.add_routes(app)
        # Cancel handlers when the client hangs up, so stalled faults don't linger.
        self._runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=0.5
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site.port
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # --- the handler -----------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        body: Body = await request.json()
        record = Recorded(body, {k.lower(): v for k, v in request.headers.items()})
        self.requests.append(record)
        step = self._steps.popleft() if self._steps else Reply()
        if self.api_key is not None and self.presented_key(request) != self.api_key:
            shown = self.presented_key(request)
            step = Fault.status_error(401, "authentication_error", f"Invalid key: {shown}.")
        step = self.refused(body) or step
        if isinstance(step, Fault) and step.kind is FaultKind.STATUS:
            headers = {}
            if step.retry_after is not None:
                headers["retry-after"] = f"{step.retry_after:g}"
                headers["retry-after-ms"] = f"{step.retry_after * 1000:g}"
            return web.json_response(self.error_body(step), status=step.status, headers=headers)
        if isinstance(step, Fault) and step.kind is FaultKind.SLOW_HEADERS:
            await asyncio.sleep(step.delay)
        reply = step if isinstance(step, Reply) else Reply()
        text = reply.text(body) if callable(reply.text) else reply.text
        text = self.default_text if text is None else text
        size = reply.chunk_chars or self.chunk_chars
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        record.deltas = len(chunks)
        usage = reply.usage or (self.prompt_words(body), len(chunks))
        if not body.get("stream"):
            record.server_seconds = time.perf_counter() - started
            return web.json_response(self.completion(body, text, usage))
        fault = step if isinstance(step, Fault) else None
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        self._count(+1)
        try:
            frames = self.frames(body, chunks, usage)
            if await self._write_stream(request, response, reply, fault, frames):
                self.streams.completed += 1
        except (asyncio.CancelledError, ConnectionResetError):
            self.streams.closed_by_client += 1
            raise
        finally:
            record.server_seconds = time.perf_counter() - started
            self._count(-1)
        return response

    async def _write_stream(
        self,
        request: web.Request,
        response: web.StreamResponse,
        reply: Reply,
        fault: Fault | None,
        frames: Frames,
    ) -> bool:
        """Write one scripted stream; False if it was deliberately dropped."""
        for frame in frames.head:
            await response.write(frame)
        await asyncio.sleep(reply.first_chunk_delay)
        for index, frame in enumerate(frames.deltas):
            if fault is not None and index == fault.after_chunks:
                break
            if index:
                await asyncio.sleep(reply.chunk_delay)
            await response.write(frame)
        if fault is None:
            for frame in frames.tail:
                await response.write(frame)
        elif fault.kind is FaultKind.DROP:
            # close() flushes what was written, then hangs up without the chunked
            # terminator, so the client sees an incomplete body, not a clean end.
            assert request.transport is not None
            request.transport.close()
            return False
        elif fault.kind is FaultKind.MALFORMED:
            await response.write(self.malformed_frame())
        elif fault.kind is FaultKind.STREAM_ERROR:
            await response.write(self.stream_error_frame())
        await response.write_eof()
        return True

    def _count(self, delta: int) -> None:
        self.streams.open += delta
        self.streams._changed.set()
