"""Issue 17.5: what a client sends to a webhook never gets a 500.

Every body, header and nesting depth gets a 4xx (or the 200 of a real
update), also before authentication. Requests are written byte by byte on a
raw socket, so headers can hold what an HTTP client library would refuse to
send (non-ASCII, bytes that are not UTF-8). The servers are the real
`SlackPlatform` in HTTP mode (against the fake Slack Web API) and the real
`TelegramPlatform` in webhook mode (against the fake Bot API), on one
aiohttp app as in `chatbridge run`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chatbridge.config import SlackConfig, TelegramConfig
from chatbridge.core.app.webhooks import mount
from chatbridge.core.ports import Platform
from chatbridge.platforms.slack import EVENTS_PATH, SlackPlatform
from chatbridge.platforms.telegram import SECRET_HEADER, TelegramPlatform
from tests.support import tally
from tests.support.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.fake_telegram import FakeTelegram
from tests.support.fakes import AcceptAll
from tests.support.thread_loop import ThreadLoop

EXAMPLES = int(os.environ.get("CHATBRIDGE_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=max(1, EXAMPLES // 3),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SLACK_SECRET = "edge-slack-signing-secret"
TG_SECRET = "edge-webhook-secret"
TG_PATH = "/telegram/webhook"
DEEP = 100_000


class _Servers:
    """Slack HTTP mode and Telegram webhook mode on one chatbridge-like server."""

    def __init__(self) -> None:
        self.port = 0
        self._parts: list[Any] = []

    async def start(self) -> None:
        slack, telegram = FakeSlack(), FakeTelegram()
        await slack.__aenter__()
        await telegram.__aenter__()
        app = web.Application()
        slack_config = SlackConfig.model_validate({
            "enabled": True, "bot_token": BOT_TOKEN, "base_url": slack.base_url,
            "signing_secret": SLACK_SECRET,
        })  # fmt: skip
        tg_config = TelegramConfig.model_validate({
            "enabled": True, "token": telegram.token, "base_url": telegram.base_url,
            "mode": "webhook", "webhook_url": "http://127.0.0.1:1/telegram/webhook",
            "webhook_secret": TG_SECRET,
        })  # fmt: skip
        platforms: list[Platform] = [
            SlackPlatform(config=slack_config, handler=AcceptAll()),
            TelegramPlatform(config=tg_config, handler=AcceptAll()),
        ]
        for platform in platforms:
            mount(app, platform.routes)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(runner.addresses[0][1])
        for platform in platforms:
            await platform.start()
        self._parts = [slack, telegram, runner, *platforms]

    async def stop(self) -> None:
        slack, telegram, runner, *platforms = self._parts
        for platform in platforms:
            await platform.aclose()
        await runner.cleanup()
        await telegram.__aexit__(None, None, None)
        await slack.__aexit__(None, None, None)


async def raw_post(port: int, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> int:
    """POST with exactly these header bytes; the status the server answered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        head = [f"POST {path} HTTP/1.1".encode(), b"Host: 127.0.0.1", b"Connection: close"]
        head += [b"Content-Length: " + str(len(body)).encode()]
        head += [name + b": " + value for name, value in headers]
        writer.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        await writer.drain()
        status = await reader.readline()
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass
    return int(status.split()[1])


def slack_signature(body: bytes, stamp: str | None = None) -> list[tuple[bytes, bytes]]:
    stamp = stamp or str(int(time.time()))
    base = b"v0:" + stamp.encode() + b":" + body
    digest = hmac.new(SLACK_SECRET.encode(), base, hashlib.sha256).hexdigest()
    return [
        (b"X-Slack-Request-Timestamp", stamp.encode()),
        (b"X-Slack-Signature", b"v0=" + digest.encode()),
    ]


JSON = [(b"Content-Type", b"application/json")]
FORM = [(b"Content-Type", b"application/x-www-form-urlencoded")]


def nested(depth: int, opener: str = "[") -> bytes:
    closer = {"[": "]", "{": "}"}[opener]
    if opener == "{":
        return (('{"a":' * depth) + "1" + ("}" * depth)).encode()
    return (opener * depth + closer * depth).encode()


@pytest.fixture(scope="module")
def servers(loop: ThreadLoop) -> Iterator[_Servers]:
    found = _Servers()
    loop.run(found.start())
    yield found
    loop.run(found.stop())


# -- the two findings, and their neighbours -----------------------------------------


@pytest.mark.parametrize(
    "stamp",
    [b"abc", b"", b" ", b"1e9", b"-", b"9" * 5000, "١٢٣".encode(), b"\xff\xfe", b"12\x0034"],
)
def test_slack_an_unauthenticated_timestamp_that_is_no_number_gets_401(
    loop: ThreadLoop, servers: _Servers, stamp: bytes
) -> None:
    headers = [*JSON, (b"X-Slack-Request-Timestamp", stamp), (b"X-Slack-Signature", b"v0=00")]
    status = loop.run(raw_post(servers.port, EVENTS_PATH, headers, b'{"type":"event_callback"}'))
    assert 400 <= status < 500, status


@pytest.mark.parametrize(
    "signature", ["v0=ü".encode(), b"\xff", "v0=✓".encode(), b"v0=" + b"0" * 64]
)
def test_slack_a_signature_that_is_not_ascii_gets_401(
    loop: ThreadLoop, servers: _Servers, signature: bytes
) -> None:
    body = b'{"type":"event_callback"}'
    stamp = str(int(time.time())).encode()
    headers = [*JSON, (b"X-Slack-Request-Timestamp", stamp), (b"X-Slack-Signature", signature)]
    assert loop.run(raw_post(servers.port, EVENTS_PATH, headers, body)) == 401


@pytest.mark.parametrize(("opener", "kind"), [("[", JSON), ("{", JSON), ("[", FORM)])
def test_slack_a_signed_body_nested_100000_deep_gets_400(
    loop: ThreadLoop, servers: _Servers, opener: str, kind: list[tuple[bytes, bytes]]
) -> None:
    body = nested(DEEP, opener)
    if kind is FORM:
        body = b"payload=" + body
    status = loop.run(raw_post(servers.port, EVENTS_PATH, [*kind, *slack_signature(body)], body))
    assert status == 400, status


@pytest.mark.parametrize("opener", ["[", "{"])
def test_telegram_an_authenticated_body_nested_100000_deep_gets_400(
    loop: ThreadLoop, servers: _Servers, opener: str
) -> None:
    headers = [*JSON, (SECRET_HEADER.encode(), TG_SECRET.encode())]
    status = loop.run(raw_post(servers.port, TG_PATH, headers, nested(DEEP, opener)))
    assert status == 400, status


@pytest.mark.parametrize(
    "secret", ["geheimnis-ü".encode(), b"\xff\xfe", b"edge-webhook-secret\xff"]
)
def test_telegram_a_secret_header_that_is_not_ascii_gets_403(
    loop: ThreadLoop, servers: _Servers, secret: bytes
) -> None:
    headers = [*JSON, (SECRET_HEADER.encode(), secret)]
    status = loop.run(raw_post(servers.port, TG_PATH, headers, b'{"update_id": 1}'))
    assert status == 403, status


# -- fuzz: headers and nesting ------------------------------------------------------

header_value = st.one_of(
    st.binary(max_size=80).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
    st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.integers(-(10**30), 10**30).map(lambda n: str(n).encode()),
    st.sampled_from([b"abc", b"", "١٢٣".encode(), b"v0=" + b"f" * 64, b"9" * 5000]),
).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
depth = st.one_of(st.integers(0, 50), st.integers(900, 1100), st.integers(10_000, 200_000))


@FUZZ
@given(stamp=header_value, signature=header_value, body=st.binary(max_size=200))
@example(stamp=b"abc", signature=b"v0=00", body=b"{}")
def test_slack_any_signature_headers_get_401_before_anything_else(
    loop: ThreadLoop, servers: _Servers, stamp: bytes, signature: bytes, body: bytes
) -> None:
    tally.add("inputs fuzzed", "slack /slack/events signature headers")
    headers = [*JSON, (b"X-Slack-Request-Timestamp", stamp), (b"X-Slack-Signature", signature)]
    status = loop.run(raw_post(servers.port, EVENTS_PATH, headers, body))
    assert 400 <= status < 500, status


@FUZZ
@given(levels=depth, opener=st.sampled_from("[{"), signed=st.booleans(), form=st.booleans())
def test_slack_any_nesting_depth_gets_a_4xx(
    loop: ThreadLoop, servers: _Servers, levels: int, opener: str, signed: bool, form: bool
) -> None:
    tally.add("inputs fuzzed", "slack /slack/events nesting depths")
    body = nested(levels, opener)
    if form:
        body = b"payload=" + body
    headers = [*(FORM if form else JSON), *(slack_signature(body) if signed else [])]
    status = loop.run(raw_post(servers.port, EVENTS_PATH, headers, body))
    assert 400 <= status < 500, status
    if not signed:  # 413: past aiohttp's 1 MiB body limit, refused before anything
        assert status in (401, 413), status


@FUZZ
@given(secret=header_value, levels=depth, opener=st.sampled_from("[{"), right=st.booleans())
def test_telegram_any_secret_header_and_nesting_depth_get_a_4xx(
    loop: ThreadLoop, servers: _Servers, secret: bytes, levels: int, opener: str, right: bool
) -> None:
    tally.add("inputs fuzzed", "telegram webhook secret headers and nesting depths")
    given_secret = TG_SECRET.encode() if right else secret
    headers = [*JSON, (SECRET_HEADER.encode(), given_secret)]
    status = loop.run(raw_post(servers.port, TG_PATH, headers, nested(levels, opener)))
    assert 400 <= status < 500, status
    if given_secret != TG_SECRET.encode():
        # 400: aiohttp's own parser refused the header (control bytes); never taken.
        assert status in (400, 403), status
