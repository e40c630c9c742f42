"""Issue 17.2 on Slack: an event the inbox refuses is not acked (Slack retries it)
and its user hears one sentence, however often Slack retries."""

from __future__ import annotations

from aiohttp import web

from chatbridge.core.app.webhooks import mount
from chatbridge.core.models import IncomingMessage
from chatbridge.core.ports.store import StoreError
from chatbridge.core.texts import say
from chatbridge.platforms.slack import SlackPlatform
from tests.support import fake_slack_events as ev
from tests.support.fake_slack import FakeSlack

from .conftest import SECRET, slack_config


class FullInbox:
    """Our own `MessageHandler` Protocol with a full store: `accept` raises as the
    engine's does when SQLite says the disk is full."""

    def __init__(self) -> None:
        self.calls = 0

    async def accept(self, message: IncomingMessage) -> bool:
        self.calls += 1
        raise StoreError("/srv/bot.db: write failed (database or disk is full)")


async def test_a_refused_event_is_not_acked_and_its_user_hears_once(fake: FakeSlack) -> None:
    server = web.Application()
    inbox = FullInbox()
    platform = SlackPlatform(
        config=slack_config(fake, mode="http"),
        handler=inbox,
        say=lambda key: say("en", key),
    )
    mount(server, platform.routes)
    runner = web.AppRunner(server)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    await platform.start()
    try:
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
        event = ev.dm_message("Wo bleibt das Paket?")
        for retry in range(3):  # the first delivery and two of Slack's retries
            status, _, _ = await fake.post_event(url, event, signing_secret=SECRET)
            assert status >= 500, retry  # not acked: Slack delivers it again
        assert inbox.calls == 3
        assert fake.bot_texts(ev.DM_CHANNEL) == [say("en", "inbox_full")]
    finally:
        await platform.aclose()
        await runner.cleanup()
