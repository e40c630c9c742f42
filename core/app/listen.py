"""chatbridge's HTTP address: bound at start-up, served once the app exists.

`run` binds `server.host:port` before any platform starts, so a port in use
is one sentence before anything was received; the aiohttp app that answers
on those sockets (and aiohttp itself) can then wait until the platforms
receive, or until a webhook platform asks for it.
"""

from __future__ import annotations

import contextlib
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["bind", "serve_on"]


def bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address `host` names (as asyncio's
    `create_server` binds them); raises OSError, closing what it opened."""
    sockets: list[socket.socket] = []
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    unique = list(dict.fromkeys(infos))
    if not port:
        unique = unique[:1]  # port 0: the OS picks one; one address keeps it one port
    try:
        for family, kind, proto, _, address in unique:
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(128)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


async def serve_on(
    app: web.Application, sockets: list[socket.socket], stack: contextlib.AsyncExitStack
) -> web.AppRunner:
    """Serve `app` on the bound `sockets` until `stack` closes."""
    from aiohttp import web

    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    stack.push_async_callback(runner.cleanup)
    for sock in sockets:
        await web.SockSite(runner, sock).start()
    return runner
