"""TelegramOutbox against the fake Bot API: formatting, edits and the error contract."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from telegram import Bot

from chatbridge.core.models import IncomingMessage
from chatbridge.platforms.base import DeliveryError, DeliveryRetry, Outbox
from chatbridge.platforms.telegram import TelegramOutbox, sent_message, telegram_delivery
from tests.platforms.telegram.conftest import Launch, StandInEngine
from tests.support.fake_telegram import FakeTelegram

CHAT = 100
# PTB's RetryAfter warns about its own future int -> timedelta change.
pytestmark = pytest.mark.filterwarnings("ignore:.*retry_after.*:DeprecationWarning")


@pytest.fixture
async def bot(fake: FakeTelegram) -> AsyncIterator[Bot]:
    fake.push_text(CHAT, CHAT, "hi")  # the chat must exist, as on Telegram
    async with Bot(fake.token, base_url=fake.base_url) as client:
        yield client


@pytest.fixture
def outbox(bot: Bot) -> TelegramOutbox:
    return TelegramOutbox(bot, CHAT)


async def test_send_then_edit_updates_the_visible_message(
    fake: FakeTelegram, outbox: TelegramOutbox
) -> None:
    handle = await outbox.send("Hel")
    await outbox.edit(handle, "Hello, world")
    assert fake.bot_texts(CHAT) == ["Hello, world"]
    assert [m.edits for m in fake.messages(CHAT) if m.text == "Hello, world"] == [1]


async def test_send_returns_a_chat_and_message_reference(
    fake: FakeTelegram, bot: Bot, outbox: TelegramOutbox
) -> None:
    first = await outbox.send("one")
    second = await outbox.send("two")
    ids = [m.message_id for m in fake.messages(CHAT) if m.sender["is_bot"]]
    assert [first, second] == [sent_message(CHAT, i) for i in ids]
    assert first == f"{CHAT}:{ids[0]}"  # a plain string: it is stored with the inbox entry
    # A reference is all an edit needs, e.g. one from another outbox after a restart.
    await TelegramOutbox(bot, CHAT).edit(first, "one, edited")
    assert fake.bot_texts(CHAT) == ["one, edited", "two"]


async def test_edit_of_a_bad_reference_is_a_delivery_error(outbox: TelegramOutbox) -> None:
    with pytest.raises(DeliveryError):
        await outbox.edit("not-a-reference", "text")
    with pytest.raises(DeliveryError):
        await outbox.edit(sent_message(CHAT, 999), "text")  # Telegram: message to edit not found


async def test_failures_outside_telegram_are_delivery_errors(fake: FakeTelegram) -> None:
    # Nothing listens on the port any more: the SDK's own network error.
    async with Bot(fake.token, base_url=fake.base_url) as client:
        await fake.__aexit__(None, None, None)
        with pytest.raises(DeliveryError) as info:
            await TelegramOutbox(client, CHAT).send("lost")
    assert not isinstance(info.value, DeliveryRetry)
    assert "\n" not in str(info.value)


async def test_flood_control_delays_later_calls_into_that_chat_only(
    fake: FakeTelegram, bot: Bot
) -> None:
    fake.push_text(200, 200, "hi")
    delivery = telegram_delivery()  # the platform shares one (its chat gate) between its outboxes
    first, later, other = (
        TelegramOutbox(bot, chat, delivery=delivery) for chat in (CHAT, CHAT, 200)
    )
    fake.fail_next("sendMessage", retry_after=1)
    with pytest.raises(DeliveryRetry):
        await first.send("refused")
    await other.send("another chat")
    await later.send("same chat")
    refused, elsewhere, retried = fake.calls_to("sendMessage")
    assert elsewhere.params["chat_id"] == 200
    assert elsewhere.at - refused.at < 0.5, "another chat must not wait"
    assert retried.at - refused.at >= 0.9, "the same chat must wait out retry_after"
    assert fake.bot_texts(CHAT) == ["same chat"]


async def test_identical_edit_is_not_an_error(fake: FakeTelegram, outbox: TelegramOutbox) -> None:
    handle = await outbox.send("same")
    await outbox.edit(handle, "same")  # Telegram: 400 message is not modified
    assert len(fake.calls_to("editMessageText")) == 1
    assert fake.bot_texts(CHAT) == ["same"]


@pytest.mark.parametrize("method", ["sendMessage", "editMessageText"])
async def test_flood_control_becomes_delivery_retry(
    fake: FakeTelegram, outbox: TelegramOutbox, method: str
) -> None:
    handle = await outbox.send("first")
    fake.fail_next(method, retry_after=3)
    attempt = {
        "sendMessage": lambda: outbox.send("second"),
        "editMessageText": lambda: outbox.edit(handle, "second"),
    }[method]
    with pytest.raises(DeliveryRetry) as info:
        await attempt()
    assert info.value.retry_after == 3
    assert fake.bot_texts(CHAT)[-1] == "first"  # nothing went out


async def test_markdown_is_sent_as_entities(fake: FakeTelegram, outbox: TelegramOutbox) -> None:
    await outbox.send("**Bold** words\n\n```python\nprint(1)\n```")
    [message] = [m for m in fake.messages(CHAT) if m.sender["is_bot"]]
    assert message.text == "Bold words\n\nprint(1)"
    assert {"type": "bold", "offset": 0, "length": 4} in message.entities
    assert {"type": "pre", "offset": 12, "length": 8, "language": "python"} in message.entities


async def test_rejected_entities_resend_the_raw_text(
    fake: FakeTelegram, outbox: TelegramOutbox
) -> None:
    fake.reject_entities_next()
    handle = await outbox.send("**keep** me")
    first, second = fake.calls_to("sendMessage")
    assert "entities" in first.params
    assert "entities" not in second.params
    assert fake.bot_texts(CHAT) == ["**keep** me"]

    fake.reject_entities_next()
    await outbox.edit(handle, "**keep** me too")
    assert fake.bot_texts(CHAT) == ["**keep** me too"]


async def test_markup_that_grows_past_the_limit_is_sent_as_raw_text(
    fake: FakeTelegram, outbox: TelegramOutbox
) -> None:
    text = "# a\n" * 1000  # 4000 chars; every heading gains an emoji when converted
    await outbox.send(text)
    [call] = fake.calls_to("sendMessage")
    assert call.params["text"] == text
    assert "entities" not in call.params


async def test_other_refusals_are_one_line_delivery_errors(outbox: TelegramOutbox) -> None:
    with pytest.raises(DeliveryError) as info:
        await outbox.send("x" * 5000)
    assert not isinstance(info.value, DeliveryRetry)
    assert str(info.value) == "telegram sendMessage: Message is too long"


async def test_typing_failure_is_swallowed(fake: FakeTelegram, outbox: TelegramOutbox) -> None:
    fake.fail_next("sendChatAction", retry_after=30)
    await outbox.typing()
    assert len(fake.calls_to("sendChatAction")) == 1


async def test_only_the_first_message_quotes_the_question(fake: FakeTelegram, bot: Bot) -> None:
    box = TelegramOutbox(bot, CHAT, reply_to=1)
    await box.send("part one")
    await box.send("part two")
    first, second = fake.calls_to("sendMessage")
    assert first.params["reply_parameters"] == {
        "message_id": 1,
        "allow_sending_without_reply": True,
    }
    assert "reply_parameters" not in second.params


async def test_platform_outbox_surfaces_429_through_the_rate_limiter(
    fake: FakeTelegram, launch: Launch
) -> None:
    waits: list[float] = []

    async def reply(message: IncomingMessage, outbox: Outbox) -> None:
        assert outbox.limits.max_chars == 4096
        try:
            await outbox.send("answer")
        except DeliveryRetry as exc:
            waits.append(exc.retry_after)
            await outbox.send("answer")

    fake.fail_next("sendMessage", retry_after=2)
    await launch(engine=StandInEngine(reply), edit_interval=1.5)
    fake.push_text(CHAT, CHAT, "question")
    await fake.wait_for(lambda: fake.bot_texts(CHAT) == ["answer"])
    assert waits == [2]
