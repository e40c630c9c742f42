"""The Outbox contract for `SlackOutbox`, against the fake Web API."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.core.ports import DeliveryError, DeliveryRetry
from chatbridge.platforms.slack import Address, SlackPlatform
from tests.support import fake_slack_events as ev
from tests.support.closing import Closing
from tests.support.fake_slack import FakeSlack

from .conftest import slack_config

QUESTION_TS = "1700000000.000100"


class NoEngine:
    async def accept(self, message: IncomingMessage) -> bool:
        raise AssertionError("nothing is received in outbox tests")


def _message(channel: str = ev.CHANNEL, thread: str = QUESTION_TS) -> IncomingMessage:
    conversation = Conversation("slack", channel, ev.USER_ID, thread, ChatKind.GROUP)
    address = Address(channel, thread, QUESTION_TS).encode()
    return IncomingMessage(conversation, "q", event_id="Ev1", reply_address=address)


@pytest.fixture
async def platform(fake: FakeSlack) -> AsyncIterator[SlackPlatform]:
    slack = SlackPlatform(config=slack_config(fake), handler=NoEngine())
    await slack.start()
    yield slack
    await slack.aclose()


async def test_send_returns_a_str_ref_and_edit_changes_that_message(
    fake: FakeSlack, platform: SlackPlatform
) -> None:
    outbox = platform.outbox(_message())
    ref = await outbox.send("**Entwurf**")
    assert isinstance(ref, str)
    await outbox.edit(ref, "**Fertig** mit `code`")
    assert fake.thread(ev.CHANNEL, QUESTION_TS) == ["*Fertig* mit `code`"]

    rebuilt = platform.outbox(_message())  # e.g. after a restart
    await rebuilt.edit(ref, "nochmal geändert")
    assert fake.thread(ev.CHANNEL, QUESTION_TS) == ["nochmal geändert"]


async def test_429_becomes_delivery_retry_and_holds_the_channel(
    fake: FakeSlack, platform: SlackPlatform
) -> None:
    outbox = platform.outbox(_message())
    ref = await outbox.send("eins")
    fake.rate_limit_next("chat.update", retry_after=1)
    with pytest.raises(DeliveryRetry) as caught:
        await outbox.edit(ref, "zwei")
    assert caught.value.retry_after == 1
    fake.rate_limit_next("chat.postMessage", retry_after=2)
    with pytest.raises(DeliveryRetry):
        await outbox.send("drei")


async def test_refusals_and_malformed_replies_become_delivery_error(
    fake: FakeSlack, platform: SlackPlatform
) -> None:
    outbox = platform.outbox(_message())
    with pytest.raises(DeliveryError, match="message_not_found"):
        await outbox.edit(f"{ev.CHANNEL}:1.000001", "x")
    with pytest.raises(DeliveryError):
        await outbox.edit("no-reference", "x")
    bad = platform.outbox(_message(channel="not-a-channel"))
    with pytest.raises(DeliveryError, match="channel_not_found"):
        await bad.send("x")


async def test_a_malformed_web_api_answer_is_a_delivery_error(
    fake: FakeSlack, closing: Closing
) -> None:
    async def broken(request: web.Request) -> web.Response:
        if request.match_info["method"] == "auth.test":
            return web.json_response({"ok": True, "user_id": ev.BOT_USER_ID})
        if request.match_info["method"] == "chat.update":
            return web.Response(text="<html>502 Bad Gateway</html>", content_type="text/html")
        return web.json_response({"ok": True, "ts": 12})  # ts of the wrong type

    app = web.Application()
    app.router.add_route("*", "/api/{method}", broken)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base_url = f"http://127.0.0.1:{runner.addresses[0][1]}/api/"
    try:
        config = slack_config(fake, mode="http", base_url=base_url)
        slack = closing(SlackPlatform(config=config, handler=NoEngine()))
        await slack.start()
        outbox = slack.outbox(_message())
        with pytest.raises(DeliveryError):
            await outbox.send("x")
        with pytest.raises(DeliveryError):
            await outbox.edit(f"{ev.CHANNEL}:1.0", "x")
        await outbox.typing()  # never raises
    finally:
        await runner.cleanup()


async def test_typing_sets_the_thread_status_and_never_raises(
    fake: FakeSlack, platform: SlackPlatform
) -> None:
    outbox = platform.outbox(_message())
    await outbox.typing()
    assert fake.statuses == [(ev.CHANNEL, QUESTION_TS, "is thinking…")]
    fake.deny_scope("assistant.threads.setStatus")
    await outbox.typing()
    await outbox.typing()  # turned off after the first missing_scope
    assert len(fake.calls_to("assistant.threads.setStatus")) == 2


async def test_without_assistant_write_no_status_is_tried(fake: FakeSlack) -> None:
    fake.scopes.discard("assistant:write")
    slack = SlackPlatform(config=slack_config(fake), handler=NoEngine())
    await slack.start()
    try:
        await slack.outbox(_message()).typing()
        assert fake.calls_to("assistant.threads.setStatus") == []
    finally:
        await slack.aclose()
