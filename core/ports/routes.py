"""Webhook routes: what a platform that receives over HTTP asks chatbridge's server to serve.

An adapter never sees the web framework. It declares its routes
(`Platform.routes`: method, path, handler); the composition root mounts
them on chatbridge's one HTTP server (beside `/healthz` and `/metrics`)
and starts that server before the platform starts, so a webhook that
arrives early is answered (a 503 until the platform receives). A handler
reads a `WebRequest` and returns a `WebResponse`; the server translates
both to and from its framework (aiohttp's `web.Request` already is a
`WebRequest`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Route", "WebHandler", "WebRequest", "WebResponse"]


class WebRequest(Protocol):
    """One HTTP request as a route handler reads it.

    `headers` look names up without regard to case. `read()` returns the body,
    read only when asked, so a handler can refuse a request on its headers
    alone; the server bounds its size (a larger body is refused before the
    handler sees it).
    """

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def query_string(self) -> str: ...

    async def read(self) -> bytes: ...


@dataclass(frozen=True, slots=True)
class WebResponse:
    """What a route handler answers: a status, and a body with its headers."""

    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


WebHandler = Callable[[WebRequest], Awaitable[WebResponse]]
"""Answers one request. Must not raise for anything a client sends (a
malformed body is a 4xx); the server makes an exception a 500."""


@dataclass(frozen=True, slots=True)
class Route:
    """One webhook endpoint: `method` (e.g. "POST") and `path` on chatbridge's server."""

    method: str
    path: str
    handler: WebHandler
