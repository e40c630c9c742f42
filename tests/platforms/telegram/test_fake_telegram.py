"""Self-tests of the fake Bot API where its own behaviour is the subject."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.support.fake_telegram import FakeTelegram


async def test_a_client_that_hangs_up_mid_request_is_no_server_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A process stopped while it posts (a poller cut at shutdown) leaves a
    request without its body: the fake records no call and logs no error,
    so a bench or a test that stops `chatbridge run` prints only its own."""
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    async with FakeTelegram() as telegram:
        _, writer = await asyncio.open_connection("127.0.0.1", telegram.port)
        head = (
            f"POST /bot{telegram.token}/sendMessage HTTP/1.1\r\n"
            "Host: 127.0.0.1\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            "Content-Length: 100\r\n\r\n"
            "chat_id=1&te"
        )
        writer.write(head.encode())
        await writer.drain()
        writer.close()  # 88 bytes of the body never come
        await writer.wait_closed()
        await telegram.wait_for(lambda: telegram.cut_off == 1)
        assert telegram.calls == []
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
