"""The `Outbox` contract, one suite for every platform, each against its wire fake.

Every outbox must: return a `str` reference from `send`; change exactly that
message on `edit`, also through an outbox rebuilt from the same message (as
after a restart); turn flood control into `DeliveryRetry` and any other
failure — a refusal or a reference it cannot use — into `DeliveryError`;
never raise from `typing`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import pytest

from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.core.ports import DeliveryError, DeliveryRetry, Outbox, Platform, SentMessage
from tests.platforms.discord.conftest import discord_config
from tests.platforms.slack.conftest import slack_config
from tests.platforms.telegram.conftest import StandInEngine, telegram_config
from tests.support import fake_slack_events as slack_ids
from tests.support.fake_discord import CHANNEL_ID, USER_ID, FakeDiscord, point_discord_at
from tests.support.fake_slack import FakeSlack
from tests.support.fake_telegram import FakeTelegram


@dataclass
class Harness:
    platform: Platform
    message: IncomingMessage
    shown: Callable[[SentMessage], str | None]  # what the chat shows for that message now
    flood_next_edit: Callable[[], None]

    def outbox(self) -> Outbox:
        return self.platform.outbox(self.message)


@asynccontextmanager
async def telegram() -> AsyncIterator[Harness]:
    from chatbridge.platforms.telegram import TelegramPlatform

    async with FakeTelegram() as fake:
        engine = StandInEngine()
        platform = TelegramPlatform(config=telegram_config(fake), handler=engine)
        await platform.start()
        chat = 579304651
        fake.make_update(chat, chat, "Frage")  # the chat exists once the user wrote
        message = IncomingMessage(
            Conversation("telegram", str(chat), str(chat)),
            "Frage",
            event_id="1",
            reply_address=f'{{"chat": {chat}, "thread": null, "reply_to": null}}',
        )

        def shown(ref: SentMessage) -> str | None:
            wanted = int(ref.rpartition(":")[2])
            found = [m.text for m in fake.messages(chat) if m.message_id == wanted]
            return found[0] if found else None

        try:
            yield Harness(platform, message, shown, lambda: fake.fail_next("editMessageText"))
        finally:
            await platform.aclose()


@asynccontextmanager
async def slack() -> AsyncIterator[Harness]:
    from chatbridge.platforms.slack import Address, SlackPlatform

    async with FakeSlack() as fake:
        platform = SlackPlatform(config=slack_config(fake), handler=StandInEngine())
        await platform.start()
        question = "1700000000.000100"
        message = IncomingMessage(
            Conversation("slack", slack_ids.CHANNEL, slack_ids.USER_ID, question, ChatKind.GROUP),
            "Frage",
            event_id="Ev1",
            reply_address=Address(slack_ids.CHANNEL, question, question).encode(),
        )

        def shown(ref: SentMessage) -> str | None:
            stored = fake.message(slack_ids.CHANNEL, ref.partition(":")[2])
            return stored.text if stored is not None else None

        try:
            yield Harness(platform, message, shown, lambda: fake.rate_limit_next("chat.update"))
        finally:
            await platform.aclose()


@asynccontextmanager
async def discord() -> AsyncIterator[Harness]:
    from chatbridge.platforms.discord import Address, DiscordPlatform, encode_address

    async with AsyncExitStack() as stack:
        fake = await stack.enter_async_context(FakeDiscord())
        stack.enter_context(point_discord_at(fake))
        platform = DiscordPlatform(
            config=discord_config(fake),
            handler=StandInEngine(),
            guild_ready_timeout=0.05,
        )
        await platform.start()
        stack.push_async_callback(platform.aclose)
        stored = fake.user_message(CHANNEL_ID, "Frage", mention_bot=True)
        message = IncomingMessage(
            Conversation("discord", str(CHANNEL_ID), str(USER_ID), "", ChatKind.GROUP),
            "Frage",
            event_id=stored["id"],
            reply_address=encode_address(Address(CHANNEL_ID, int(stored["id"]))),
        )

        def shown(ref: SentMessage) -> str | None:
            wanted = int(ref.rpartition(":")[2])
            found = [m.content for m in fake.bot_messages(CHANNEL_ID) if m.id == wanted]
            return found[0] if found else None

        def flood() -> None:
            fake.rate_limit_next("PATCH /channels/*/messages/*", retry_after=2.0, via=False)

        yield Harness(platform, message, shown, flood)


PLATFORMS = {"telegram": telegram, "slack": slack, "discord": discord}


@pytest.fixture(params=sorted(PLATFORMS))
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    async with PLATFORMS[request.param]() as running:
        yield running


async def test_send_returns_a_reference_and_edit_changes_that_message(harness: Harness) -> None:
    outbox = harness.outbox()
    first = await outbox.send("Entwurf eins")
    second = await outbox.send("Entwurf zwei")
    assert isinstance(first, str)
    assert first != second
    await outbox.edit(first, "Endfassung")
    assert harness.shown(first) == "Endfassung"
    assert harness.shown(second) == "Entwurf zwei", "edit changed another message"


async def test_an_outbox_rebuilt_from_the_message_edits_the_same_message(harness: Harness) -> None:
    ref = await harness.outbox().send("vor dem Neustart")
    await harness.outbox().edit(ref, "nach dem Neustart")
    assert harness.shown(ref) == "nach dem Neustart"


async def test_flood_control_is_delivery_retry_and_changes_nothing(harness: Harness) -> None:
    outbox = harness.outbox()
    ref = await outbox.send("a")
    harness.flood_next_edit()
    with pytest.raises(DeliveryRetry) as caught:
        await outbox.edit(ref, "b")
    assert caught.value.retry_after > 0
    assert harness.shown(ref) == "a"


@pytest.mark.parametrize("ref", ["kaputt", "1:2:3:x", ""])
async def test_a_reference_it_cannot_use_is_delivery_error(harness: Harness, ref: str) -> None:
    with pytest.raises(DeliveryError):
        await harness.outbox().edit(ref, "x")


async def test_typing_never_raises(harness: Harness) -> None:
    await harness.outbox().typing()
    assert harness.outbox().limits.max_chars > 0
