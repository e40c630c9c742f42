"""Platforms' webhook routes (`core.ports.Route`) mounted on chatbridge's aiohttp server.

A route's handler reads aiohttp's request as a `WebRequest` (it is one) and
answers a `WebResponse`, turned into aiohttp's here; aiohttp itself is
imported only when a server is built.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from chatbridge.core.ports import Route, WebHandler

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["mount"]


def mount(app: web.Application, routes: Iterable[Route]) -> None:
    """Add every route to `app` (before its runner is set up: aiohttp freezes
    a router once its app runs)."""
    for route in routes:
        app.router.add_route(route.method, route.path, _served(route.handler))


def _served(handler: WebHandler) -> Callable[[web.Request], Awaitable[web.Response]]:
    from aiohttp import web

    async def serve(request: web.Request) -> web.Response:
        answer = await handler(request)
        return web.Response(status=answer.status, body=answer.body, headers=answer.headers)

    return serve
