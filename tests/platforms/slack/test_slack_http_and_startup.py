"""HTTP Events API security, acks that follow the inbox, and start-up errors."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiohttp import web

from chatbridge.core.app.webhooks import mount
from chatbridge.core.models import IncomingMessage
from chatbridge.core.ports import PlatformStartFailed
from chatbridge.core.ports.store import StoreError
from chatbridge.platforms.slack import SlackPlatform
from tests.support import fake_slack_events as ev
from tests.support.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.support.fakes import VirtualClock

from .conftest import SECRET, Launch, slack_config


class BrokenInbox:
    """An engine whose store is down: `accept` raises, as the real one does."""

    def __init__(self) -> None:
        self.calls = 0

    async def accept(self, message: IncomingMessage) -> bool:
        self.calls += 1
        raise StoreError("database is locked")


async def test_bad_signature_and_stale_timestamp_get_401_and_reach_nothing(
    fake: FakeSlack, launch: Launch
) -> None:
    run = await launch(mode="http")
    forged = await fake.post_event(
        run.url, ev.dm_message("forged"), signing_secret=SECRET, bad_signature=True
    )
    stale = await fake.post_event(
        run.url, ev.dm_message("replayed"), signing_secret=SECRET,
        timestamp=int(time.time()) - 6 * 60,
    )  # fmt: skip
    assert (forged[0], stale[0]) == (401, 401)
    status, body, _ = await fake.post_url_verification(run.url, signing_secret=SECRET)
    assert status == 200
    assert "fake-challenge" in body
    ok = await fake.post_event(run.url, ev.dm_message("echt"), signing_secret=SECRET)
    assert ok[0] == 200
    await fake.wait_for(lambda: fake.bot_texts(ev.DM_CHANNEL))
    await run.bot.engine.drain(2.0)
    assert [p.messages[-1].content for p in run.bot.provider.prompts] == ["echt"]


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_an_event_the_inbox_cannot_take_is_not_acked(
    fake: FakeSlack, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = web.Application()
    inbox = BrokenInbox()
    platform = SlackPlatform(config=slack_config(fake, mode=mode), handler=inbox)
    mount(server, platform.routes)
    runner = web.AppRunner(server)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    await platform.start()
    try:
        event = ev.dm_message("Geht verloren?")
        if mode == "socket":
            sending = asyncio.ensure_future(fake.socket_event(event, within=60, require_ack=False))
            # bolt's error handler has decided (no ack); let what it does next reach the fake.
            await fake.wait_for(lambda: "not acknowledged" in caplog.text, within=30)
            await VirtualClock().settle()
            delivery = fake.deliveries[-1]
            sending.cancel()
            assert delivery.acked_at is None, "acked although the inbox never held it"
        else:
            url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
            status, _, _ = await fake.post_event(url, event, signing_secret=SECRET)
            assert status >= 500
        assert inbox.calls == 1
    finally:
        await platform.aclose()
        await runner.cleanup()


async def _start_failure(fake: FakeSlack, **cfg: Any) -> str:
    platform = SlackPlatform(config=slack_config(fake, **cfg), handler=BrokenInbox())
    with pytest.raises(PlatformStartFailed) as caught:
        await platform.start()
    await platform.aclose()
    message = str(caught.value)
    assert "\n" not in message
    assert BOT_TOKEN not in message
    return message


async def test_start_up_errors_are_one_sentence(fake: FakeSlack) -> None:
    wrong_type = await _start_failure(fake, bot_token=APP_TOKEN)
    assert "xapp-" in wrong_type
    assert "bot_token" in wrong_type
    assert fake.calls == [], "the token type is checked before any call"
    assert "invalid_auth" in await _start_failure(fake, bot_token="xoxb-revoked")
    assert "app_token" in await _start_failure(fake, app_token="xapp-unknown")
    fake.scopes -= {"chat:write", "im:history"}
    missing = await _start_failure(fake)
    assert "chat:write" in missing
    assert "im:history" in missing
