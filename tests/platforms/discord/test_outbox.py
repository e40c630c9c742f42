"""The Outbox contract, against the fake Discord through the real discord.py client."""

from __future__ import annotations

import pytest

from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.core.ports import DeliveryError, DeliveryRetry
from chatbridge.platforms.discord import Address, encode_address
from tests.platforms.discord.conftest import Launch, Running
from tests.support.fake_discord import CHANNEL_ID, USER_ID, FakeDiscord


def _question(fake: FakeDiscord, channel: int = CHANNEL_ID) -> IncomingMessage:
    stored = fake.user_message(channel, "Frage", mention_bot=True)
    return IncomingMessage(
        conversation=Conversation(
            platform="discord", chat=str(channel), user=str(USER_ID), kind=ChatKind.GROUP
        ),
        text="Frage",
        event_id=stored["id"],
        reply_address=encode_address(Address(channel, int(stored["id"]))),
    )


@pytest.fixture
async def running(launch: Launch) -> Running:
    return await launch()


async def test_send_returns_a_str_ref_and_quotes_only_the_first_chunk(
    fake: FakeDiscord, running: Running
) -> None:
    question = _question(fake)
    outbox = running.platform.outbox(question)
    assert outbox.limits.max_chars == 2000
    assert outbox.limits.edit_interval == pytest.approx(0.05)
    first = await outbox.send("eins")
    second = await outbox.send("zwei")
    assert isinstance(first, str)
    assert first.startswith(f"{CHANNEL_ID}:")
    first_msg, second_msg = fake.bot_messages(CHANNEL_ID)
    assert first_msg.reference == int(question.event_id)
    assert second_msg.reference is None
    assert second == f"{CHANNEL_ID}:{second_msg.id}"


async def test_edit_changes_the_message_also_from_a_rebuilt_outbox(
    fake: FakeDiscord, running: Running
) -> None:
    question = _question(fake)
    ref = await running.platform.outbox(question).send("Entwurf")
    await running.platform.outbox(question).edit(ref, "Endfassung")  # as after a restart
    assert fake.bot_texts(CHANNEL_ID) == ["Endfassung"]
    assert fake.bot_messages(CHANNEL_ID)[0].edits == 1


async def test_429_without_via_becomes_delivery_retry(fake: FakeDiscord, running: Running) -> None:
    outbox = running.platform.outbox(_question(fake))
    ref = await outbox.send("a")
    fake.rate_limit_next("PATCH /channels/*/messages/*", retry_after=2.0, via=False)
    with pytest.raises(DeliveryRetry) as caught:
        await outbox.edit(ref, "b")
    assert caught.value.retry_after >= 1.0
    assert fake.bot_texts(CHANNEL_ID) == ["a"]


async def test_429_with_via_is_waited_out(fake: FakeDiscord, running: Running) -> None:
    fake.rate_limit_next("POST /channels/*/messages", retry_after=0.2, via=True)
    await running.platform.outbox(_question(fake)).send("trotzdem")
    assert fake.bot_texts(CHANNEL_ID) == ["trotzdem"]
    assert [c.status for c in fake.calls_to("POST /channels/*/messages")] == [429, 200]


async def test_refusals_and_malformed_responses_become_delivery_error(
    fake: FakeDiscord, running: Running
) -> None:
    outbox = running.platform.outbox(_question(fake))
    with pytest.raises(DeliveryError) as too_long:
        await outbox.send("x" * 2001)
    assert type(too_long.value) is DeliveryError
    fake.fail_next("POST /channels/*/messages", status=200, message="not a message")
    with pytest.raises(DeliveryError) as malformed:
        await outbox.send("y")
    assert type(malformed.value) is DeliveryError
    with pytest.raises(DeliveryError):
        await outbox.edit("not-a-ref", "z")
    with pytest.raises(DeliveryError):
        await outbox.edit(f"{CHANNEL_ID}:12345", "z")  # unknown message: 404


async def test_typing_never_raises(fake: FakeDiscord, running: Running) -> None:
    await running.platform.outbox(_question(fake)).typing()
    assert fake.typing == [CHANNEL_ID]
    lost = _question(fake)
    gone = IncomingMessage(
        conversation=lost.conversation, text="x", reply_address=encode_address(Address(42))
    )
    await running.platform.outbox(gone).typing()  # 404 Unknown Channel, swallowed
    fake.fail_next("POST /channels/*/typing", status=403, code=50013, message="Missing Permissions")
    await running.platform.outbox(lost).typing()
