"""The capped download every adapter's `fetch_file` uses, against a real HTTP server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from chatbridge.core.ports import FetchFailed, FileTooLarge
from chatbridge.platforms._download import Downloader
from tests.support.closing import Closing

CHUNK = 16 * 1024
CHUNKS = 400  # 6.4 MB if nobody stops reading


class Server:
    def __init__(self) -> None:
        self.written = 0
        self.finished = asyncio.Event()

    async def chunked(self, request: web.Request) -> web.StreamResponse:
        """Sizes can lie: no Content-Length, the body streams until the reader hangs up."""
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            for _ in range(CHUNKS):
                await response.write(b"x" * CHUNK)
                self.written += CHUNK
                await asyncio.sleep(0.001)
        finally:
            self.finished.set()
        return response

    async def html(self, _: web.Request) -> web.Response:
        return web.Response(text="<html>Sign in</html>", content_type="text/html")

    async def exact(self, _: web.Request) -> web.Response:
        return web.Response(body=b"y" * 5000, content_type="image/png")


@pytest.fixture
async def server() -> AsyncIterator[tuple[Server, str]]:
    state = Server()
    app = web.Application()
    app.router.add_get("/chunked", state.chunked)
    app.router.add_get("/html", state.html)
    app.router.add_get("/exact", state.exact)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield state, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    await runner.cleanup()


async def test_a_body_past_the_limit_stops_the_download(
    server: tuple[Server, str], closing: Closing
) -> None:
    state, base = server
    downloader = closing(Downloader("test"))
    with pytest.raises(FileTooLarge):
        await downloader.get(f"{base}/chunked", limit=100_000)
    await downloader.aclose()
    await asyncio.wait_for(state.finished.wait(), 30)
    assert state.written < CHUNKS * CHUNK, "the server was cut off before the end"


async def test_an_html_page_is_no_file_where_refused(
    server: tuple[Server, str], closing: Closing
) -> None:
    _, base = server
    downloader = closing(Downloader("test"))
    with pytest.raises(FetchFailed, match="HTML page"):
        await downloader.get(f"{base}/html", limit=10_000, refuse_html=True)
    assert await downloader.get(f"{base}/exact", limit=10_000) == bytearray(b"y" * 5000)
    with pytest.raises(FileTooLarge):
        await downloader.get(f"{base}/exact", limit=4999)
    with pytest.raises(FetchFailed, match="HTTP 404"):
        await downloader.get(f"{base}/missing", limit=10)


async def test_a_refused_connection_is_fetch_failed_without_the_url(closing: Closing) -> None:
    downloader = closing(Downloader("test"))
    with pytest.raises(FetchFailed) as caught:
        await downloader.get("http://127.0.0.1:9/secret-token/file", limit=10)
    assert "secret-token" not in str(caught.value)


class Chunks:
    """A `ByteSink` that keeps what it was given, as given."""

    def __init__(self) -> None:
        self.expected: int | None = None
        self.chunks: list[bytes] = []

    def expect(self, size: int) -> None:
        self.expected = size

    def write(self, chunk: bytes) -> None:
        self.chunks.append(chunk)


async def test_a_sink_gets_the_body_under_the_same_caps(
    server: tuple[Server, str], closing: Closing
) -> None:
    state, base = server
    downloader = closing(Downloader("test"))
    sink = Chunks()
    assert await downloader.get(f"{base}/exact", limit=10_000, sink=sink) == bytearray()
    assert (sink.expected, b"".join(sink.chunks)) == (5000, b"y" * 5000)
    with pytest.raises(FileTooLarge):
        await downloader.get(f"{base}/exact", limit=4999, sink=Chunks())
    capped = Chunks()
    with pytest.raises(FileTooLarge):
        await downloader.get(f"{base}/chunked", limit=100_000, sink=capped)
    await downloader.aclose()
    await asyncio.wait_for(state.finished.wait(), 30)
    assert state.written < CHUNKS * CHUNK, "the server was cut off before the end"
    assert sum(map(len, capped.chunks)) <= 100_000, "nothing past the limit reached the sink"
