"""Loopback only: the guard the test processes and every Python child they start run under.

`guarded(real)` wraps `socket.socket.connect`/`connect_ex` so that a non-loopback
address raises `ConnectionRefusedError` naming it; `guarded_getaddrinfo(real)`
refuses to resolve any host name but `localhost` (IP literals pass, and their
connect is checked), so no DNS query leaves the machine either.
`tests/conftest.py` installs both for every test; `install()` installs them
for a whole process, which `child_site/sitecustomize.py` does in every child
started with `child_pythonpath()` on its PYTHONPATH (`tests/support/cli.py`
and `tests/conftest.py` put it there).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["child_pythonpath", "guarded", "guarded_getaddrinfo", "install", "is_local"]

CHILD_SITE = Path(__file__).resolve().parent / "child_site"
MESSAGE = "test tried to reach non-loopback address"


def is_local(address: object) -> bool:
    """True for a loopback IP (v4 or v6), `localhost`, or a Unix socket path."""
    if isinstance(address, str | bytes):  # AF_UNIX path
        return True
    if not isinstance(address, tuple) or not address:
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def guarded(real: Callable[..., Any]) -> Callable[..., Any]:
    def connect(self: socket.socket, address: object) -> Any:
        if not is_local(address):
            raise ConnectionRefusedError(f"{MESSAGE} {address!r}")
        return real(self, address)

    return connect


def guarded_getaddrinfo(real: Callable[..., Any]) -> Callable[..., Any]:
    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in (None, "", "localhost"):
            try:
                ipaddress.ip_address(str(name).partition("%")[0])
            except ValueError:
                raise socket.gaierror(socket.EAI_NONAME, f"{MESSAGE} {name!r} (DNS)") from None
        return real(host, *args, **kwargs)

    return getaddrinfo


def install() -> None:
    """Guard this whole process (for child processes; tests use the fixture)."""
    socket.socket.connect = guarded(socket.socket.connect)  # type: ignore[method-assign]
    socket.socket.connect_ex = guarded(socket.socket.connect_ex)  # type: ignore[method-assign]
    socket.getaddrinfo = guarded_getaddrinfo(socket.getaddrinfo)


def child_pythonpath(repo: Path, existing: str | None = None) -> str:
    """PYTHONPATH for a child: the guard's site directory, the repository, then `existing`."""
    parts = [str(CHILD_SITE), str(repo)]
    parts += [p for p in (existing or "").split(os.pathsep) if p and p not in parts]
    return os.pathsep.join(parts)
