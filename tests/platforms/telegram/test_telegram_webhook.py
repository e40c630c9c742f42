"""Webhook mode: the route on the app's aiohttp server, the secret header, setWebhook."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web
from pydantic import SecretStr

from chatbridge.core.app.webhooks import mount
from chatbridge.core.models import IncomingMessage
from chatbridge.platforms.telegram import WEBHOOK_PATH, TelegramPlatform
from tests.platforms.telegram.conftest import WEBHOOK_SECRET, StandInEngine, telegram_config
from tests.support.fake_telegram import FakeTelegram

PUBLIC_URL = "https://bot.example/telegram/webhook"


@dataclass
class Served:
    platform: TelegramPlatform
    url: str  # where this test's "Telegram" posts updates


@contextlib.asynccontextmanager
async def serve(fake: FakeTelegram, engine: StandInEngine) -> AsyncIterator[Served]:
    """A platform in webhook mode on a server built like the app builds its own."""
    server = web.Application()
    config = telegram_config(
        fake, mode="webhook", webhook_url=PUBLIC_URL, webhook_secret=SecretStr(WEBHOOK_SECRET)
    )
    platform = TelegramPlatform(config=config, handler=engine, commands=engine.commands)
    mount(server, platform.routes)
    engine.attach(platform.name, platform.outbox)
    runner = web.AppRunner(server)
    await runner.setup()  # freezes the router: the route must already be there
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield Served(platform, f"http://127.0.0.1:{runner.addresses[0][1]}{WEBHOOK_PATH}")
    finally:
        await platform.aclose()
        await runner.cleanup()


@pytest.fixture
async def served(fake: FakeTelegram, engine: StandInEngine) -> AsyncIterator[Served]:
    async with serve(fake, engine) as result:
        yield result


async def test_start_sets_the_webhook_with_its_secret(fake: FakeTelegram, served: Served) -> None:
    await served.platform.start()
    assert fake.webhook == {
        "url": PUBLIC_URL,
        "secret_token": WEBHOOK_SECRET,
        "allowed_updates": ["message"],
    }
    await fake.wait_for(lambda: bool(fake.commands))  # registered beside receiving
    assert not fake.calls_to("getUpdates")
    assert not fake.calls_to("deleteWebhook")


async def test_update_with_the_secret_is_answered(
    fake: FakeTelegram, engine: StandInEngine, served: Served
) -> None:
    await served.platform.start()
    update = fake.make_update(100, 100, "via webhook")
    assert await fake.post_webhook(served.url, update, secret=WEBHOOK_SECRET) == 200
    assert engine.texts() == ["via webhook"]  # the 200 came after the inbox took it
    await fake.wait_for(lambda: fake.bot_texts(100) == ["echo: via webhook"])
    assert engine.handled[0].event_id == str(update["update_id"])


@pytest.mark.parametrize("secret", [None, "", "wrong", WEBHOOK_SECRET + "x"])
async def test_missing_or_wrong_secret_is_forbidden(
    fake: FakeTelegram, engine: StandInEngine, served: Served, secret: str | None
) -> None:
    await served.platform.start()
    forged = fake.make_update(100, 100, "forged")
    assert await fake.post_webhook(served.url, forged, secret=secret) == 403
    real = fake.make_update(100, 100, "real")
    assert await fake.post_webhook(served.url, real, secret=WEBHOOK_SECRET) == 200
    await fake.wait_for(lambda: bool(engine.handled))
    assert engine.texts() == ["real"]


async def test_edited_messages_are_acknowledged_but_ignored(
    fake: FakeTelegram, engine: StandInEngine, served: Served
) -> None:
    await served.platform.start()
    edited = fake.make_update(100, 100, "changed my mind", edited=True)
    assert await fake.post_webhook(served.url, edited, secret=WEBHOOK_SECRET) == 200
    marker = fake.make_update(100, 100, "marker")
    assert await fake.post_webhook(served.url, marker, secret=WEBHOOK_SECRET) == 200
    await fake.wait_for(lambda: bool(engine.handled))
    assert engine.texts() == ["marker"]


async def test_not_accepting_before_start_or_after_close(
    fake: FakeTelegram, engine: StandInEngine, served: Served
) -> None:
    update = fake.make_update(100, 100, "too early")
    assert await fake.post_webhook(served.url, update, secret=WEBHOOK_SECRET) == 503
    await served.platform.start()
    await served.platform.aclose()
    assert await fake.post_webhook(served.url, update, secret=WEBHOOK_SECRET) == 503
    assert engine.handled == []


async def test_body_that_is_not_an_update_is_a_bad_request(served: Served) -> None:
    await served.platform.start()
    headers = {"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET}
    async with aiohttp.ClientSession() as session:
        for body in (b"not json", b"[1, 2]", b"{}", b'{"message": {"text": "hi"}}'):
            async with session.post(served.url, data=body, headers=headers) as response:
                assert response.status == 400, body


async def test_malformed_update_is_acknowledged_and_dropped(
    fake: FakeTelegram, engine: StandInEngine, served: Served
) -> None:
    # An update Telegram can never deliver in a readable form: a 200, so it is
    # not retried for ever, and nothing reaches the engine.
    await served.platform.start()
    broken = {"update_id": 1, "message": {}}
    assert await fake.post_webhook(served.url, broken, secret=WEBHOOK_SECRET) == 200
    marker = fake.make_update(100, 100, "marker")
    assert await fake.post_webhook(served.url, marker, secret=WEBHOOK_SECRET) == 200
    await fake.wait_for(lambda: bool(engine.handled))
    assert engine.texts() == ["marker"]


class FailingInbox(StandInEngine):
    """An engine whose inbox is down: `accept` raises, as with a StoreError."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True
        self.attempts = 0

    async def accept(self, message: IncomingMessage) -> bool:
        self.attempts += 1
        if self.down:
            raise OSError("store unavailable")
        return await super().accept(message)


async def test_update_the_inbox_could_not_take_is_not_acknowledged(
    fake: FakeTelegram,
) -> None:
    inbox = FailingInbox()
    async with serve(fake, inbox) as served:
        await served.platform.start()
        update = fake.make_update(100, 100, "keep me")
        # 503: Telegram keeps the update and sends it again later.
        assert await fake.post_webhook(served.url, update, secret=WEBHOOK_SECRET) == 503
        assert inbox.attempts == 1
        assert inbox.handled == []
        inbox.down = False
        assert await fake.post_webhook(served.url, update, secret=WEBHOOK_SECRET) == 200
        await fake.wait_for(lambda: fake.bot_texts(100) == ["echo: keep me"])


def test_webhook_mode_requires_a_secret(fake: FakeTelegram) -> None:
    # The config refuses it...
    with pytest.raises(ValueError, match="webhook_secret"):
        telegram_config(fake, mode="webhook", webhook_url=PUBLIC_URL)
    # ...and so does the platform, for a section that skipped that check.
    unchecked = telegram_config(fake, enabled=False, mode="webhook", webhook_url=PUBLIC_URL)
    with pytest.raises(ValueError, match="secret"):
        TelegramPlatform(config=unchecked, handler=StandInEngine())
