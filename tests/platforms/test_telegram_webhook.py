"""Webhook mode: the route on the app's aiohttp server, the secret header, setWebhook."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web
from chatbridge.platforms.telegram import WEBHOOK_PATH, TelegramPlatform
from pydantic import SecretStr

from tests.platforms.conftest import WEBHOOK_SECRET, StandInEngine, telegram_config
from tests.support.fake_telegram import FakeTelegram

PUBLIC_URL = "https://bot.example/telegram/webhook"


@dataclass
class Served:
    platform: TelegramPlatform
    url: str  # where this test's "Telegram" posts updates


@pytest.fixture
async def served(fake: FakeTelegram, engine: StandInEngine) -> AsyncIterator[Served]:
    """A platform in webhook mode on a server built like the app builds its own."""
    server = web.Application()
    config = telegram_config(
        fake, mode="webhook", webhook_url=PUBLIC_URL, webhook_secret=SecretStr(WEBHOOK_SECRET)
    )
    platform = TelegramPlatform(config=config, engine=engine, server=server)
    runner = web.AppRunner(server)
    await runner.setup()  # freezes the router: the route must already be there
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield Served(platform, f"http://127.0.0.1:{runner.addresses[0][1]}{WEBHOOK_PATH}")
    finally:
        await platform.aclose()
        await runner.cleanup()


async def test_start_sets_the_webhook_with_its_secret(fake: FakeTelegram, served: Served) -> None:
    await served.platform.start()
    assert fake.webhook == {
        "url": PUBLIC_URL,
        "secret_token": WEBHOOK_SECRET,
        "allowed_updates": ["message"],
    }
    assert fake.commands
    assert not fake.calls_to("getUpdates")


async def test_update_with_the_secret_is_answered(
    fake: FakeTelegram, engine: StandInEngine, served: Served
) -> None:
    await served.platform.start()
    update = fake.make_update(100, 100, "via webhook")
    assert await fake.post_webhook(served.url, update, secret=WEBHOOK_SECRET) == 200
    await fake.wait_for(lambda: fake.bot_texts(100) == ["echo: via webhook"])
    assert engine.handled[0].event_id == f"telegram:{update['update_id']}"


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
        for body in (b"not json", b"[1, 2]", b"{}", b'{"update_id": 1, "message": {}}'):
            async with session.post(served.url, data=body, headers=headers) as response:
                assert response.status == 400


def test_webhook_mode_requires_a_secret(fake: FakeTelegram) -> None:
    config = telegram_config(fake, mode="webhook", webhook_url=PUBLIC_URL)
    with pytest.raises(ValueError, match="secret"):
        TelegramPlatform(config=config, engine=StandInEngine(), server=web.Application())
