"""Downloading an attachment with a cap: what every adapter's `fetch_file` uses.

The size the platform announced is checked before the request (by the
caller) and the `Content-Length` before the body; the body is read in chunks
and the download stops as soon as it passes the limit, since both can lie.
Errors are `core.ports` media errors whose text names no URL (a Telegram file
URL carries the bot token) and no header.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from chatbridge.core.ports import ByteSink, FetchFailed, FileTooLarge

if TYPE_CHECKING:
    import aiohttp

__all__ = ["Downloader"]

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
# aiohttp stops reading the socket once 2x this much waits unread (64 KiB by
# default): a sink that encodes between reads would stall the sender at every
# chunk. 1 MiB lets the transfer run on while the last chunk is encoded.
READ_BUFFER = 1024 * 1024
TIMEOUT = {"total": 120, "sock_connect": 15, "sock_read": 30}  # seconds


class Downloader:
    """One aiohttp session per adapter, opened on first use; `aclose()` on shutdown.

    aiohttp itself is imported at the first download, not at start-up: a
    Telegram bot in polling mode needs it for nothing else before its first poll.
    """

    def __init__(self, platform: str) -> None:
        self._platform = platform
        self._session: aiohttp.ClientSession | None = None

    async def get(
        self,
        url: str,
        *,
        limit: int,
        headers: Mapping[str, str] | None = None,
        refuse_html: bool = False,
        sink: ByteSink | None = None,
    ) -> bytearray:
        """The body of `url`, at most `limit` bytes; with `sink`, each chunk
        goes there as it arrives and the result is empty (see `core.ports.ByteSink`).

        `refuse_html`: an HTML page is a refusal, not the file (Slack answers a
        download without `files:read` with its login page, often as 200).
        Raises `FileTooLarge` or `FetchFailed`, nothing else.
        """
        import aiohttp

        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(**TIMEOUT))
        what = f"{self._platform} file"
        try:
            async with self._session.get(
                url, headers=headers, allow_redirects=True, read_bufsize=READ_BUFFER
            ) as response:
                if response.status != 200:
                    raise FetchFailed(f"{what}: HTTP {response.status}")
                if refuse_html and response.content_type == "text/html":
                    raise FetchFailed(f"{what}: got an HTML page instead of the file")
                announced = response.content_length
                if announced is not None and announced > limit:
                    raise FileTooLarge(f"{what}: Content-Length {announced} over {limit}")
                if sink is not None:
                    await _pour(response, announced, limit, what, sink)
                    return bytearray()
                return await _read(response, announced, limit, what)
        except (FileTooLarge, FetchFailed):
            raise
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise FetchFailed(f"{what}: {type(exc).__name__}") from None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _read(
    response: aiohttp.ClientResponse, announced: int | None, limit: int, what: str
) -> bytearray:
    """The body in one buffer: sized once when the length is announced (no
    regrowth copies of a large file), grown otherwise; capped either way."""
    if announced is None:
        body = bytearray()
        async for chunk in response.content.iter_chunked(CHUNK):
            body += chunk
            if len(body) > limit:
                raise FileTooLarge(f"{what}: more than {limit} bytes arrived")
        return body
    body = bytearray(announced)
    view, filled = memoryview(body), 0
    try:
        async for chunk in response.content.iter_chunked(CHUNK):
            if filled + len(chunk) > announced:
                raise FetchFailed(f"{what}: more bytes than its Content-Length")
            view[filled : filled + len(chunk)] = chunk
            filled += len(chunk)
    finally:
        view.release()
    if filled != announced:
        raise FetchFailed(f"{what}: {filled} of {announced} bytes arrived")
    return body


async def _pour(
    response: aiohttp.ClientResponse, announced: int | None, limit: int, what: str, sink: ByteSink
) -> None:
    """The body into `sink` chunk by chunk, with the same caps as `_read`."""
    if announced is not None:
        sink.expect(announced)
    cap = limit if announced is None else announced
    received = 0
    async for chunk in response.content.iter_any():  # as received: no re-chunking copies
        received += len(chunk)
        if received > cap:
            if announced is None:
                raise FileTooLarge(f"{what}: more than {limit} bytes arrived")
            raise FetchFailed(f"{what}: more bytes than its Content-Length")
        sink.write(chunk)
    if announced is not None and received != announced:
        raise FetchFailed(f"{what}: {received} of {announced} bytes arrived")
