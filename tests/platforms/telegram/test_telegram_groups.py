"""Who the bot answers in groups, what text reaches the engine, and forum topics."""

from __future__ import annotations

from typing import Any

import pytest

from chatbridge.core.models import ChatKind
from chatbridge.platforms.telegram import TelegramPlatform
from tests.platforms.telegram.conftest import Launch, StandInEngine, telegram_config
from tests.support.fake_telegram import FakeTelegram

GROUP = -1001234


async def _handled_before_marker(fake: FakeTelegram, engine: StandInEngine) -> list[str]:
    """Texts the engine got, once a trailing addressed marker message went through.

    Updates are dispatched in order, so when the marker arrives every earlier
    update has been accepted or dropped.
    """
    fake.push_text(GROUP, 1, "@bridge_bot marker", chat_type="supergroup")
    await fake.wait_for(lambda: "marker" in engine.texts())
    return engine.texts()[:-1]


@pytest.mark.parametrize(
    ("text", "kwargs"),
    [
        ("just chatting", {}),
        ("/help@other_bot", {}),
        ("hey @other_bot", {}),
        ("@bridge_bot from a bot", {"from_bot": True}),
        ("@bridge_bot edited", {"edited": True}),
    ],
)
async def test_messages_not_for_the_bot_are_ignored(
    fake: FakeTelegram, engine: StandInEngine, launch: Launch, text: str, kwargs: dict[str, Any]
) -> None:
    await launch()
    fake.push_text(GROUP, 1, text, chat_type="supergroup", **kwargs)
    assert await _handled_before_marker(fake, engine) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@bridge_bot what is 2+2?", "what is 2+2?"),
        ("what is 2+2, @Bridge_Bot", "what is 2+2,"),
        ("@bridge_bot, summarise this", "summarise this"),
        ("so @bridge_bot what now", "so what now"),
        ("/help", "/help"),
        # The adapter normalises commands: the @suffix naming this bot goes,
        # and /start (sent by clients on first contact) means /help.
        ("/help@bridge_bot", "/help"),
        ("/help@Bridge_Bot now", "/help now"),
        ("/start", "/help"),
        ("🎉 @bridge_bot party", "🎉 party"),  # UTF-16 offsets after an astral char
    ],
)
async def test_addressed_messages_reach_the_engine_without_the_mention(
    fake: FakeTelegram, engine: StandInEngine, launch: Launch, text: str, expected: str
) -> None:
    await launch()
    fake.push_text(GROUP, 1, text, chat_type="supergroup")
    assert await _handled_before_marker(fake, engine) == [expected]
    conv = engine.handled[0].conversation
    assert (conv.chat, conv.user, conv.thread, conv.kind) == (str(GROUP), "1", "", ChatKind.GROUP)


async def test_reply_to_the_bot_is_handled(
    fake: FakeTelegram, engine: StandInEngine, launch: Launch
) -> None:
    await launch()
    fake.push_text(GROUP, 1, "@bridge_bot first", chat_type="group")
    await fake.wait_for(lambda: fake.bot_texts(GROUP) == ["echo: first"])
    fake.push_text(GROUP, 2, "and a follow-up", chat_type="group", reply_to_bot=True)
    await fake.wait_for(lambda: len(fake.bot_texts(GROUP)) == 2)
    assert engine.texts() == ["first", "and a follow-up"]
    # In groups the answer quotes the question it answers.
    question_id = fake.messages(GROUP)[-2].message_id
    assert fake.messages(GROUP)[-1].reply_to == question_id


async def test_text_mention_of_the_bot_counts(
    fake: FakeTelegram, engine: StandInEngine, launch: Launch
) -> None:
    await launch()
    entity = {"type": "text_mention", "offset": 0, "length": 6, "user": fake.me}
    fake.push_text(GROUP, 1, "Bridge explain", chat_type="supergroup", entities=[entity])
    assert await _handled_before_marker(fake, engine) == ["explain"]


async def test_forum_topic_is_a_thread_and_the_reply_stays_in_it(
    fake: FakeTelegram, engine: StandInEngine, launch: Launch
) -> None:
    await launch()
    # The fake's topic was created by the bot: its service message is no reply to us.
    fake.push_text(GROUP, 1, "unaddressed", chat_type="supergroup", thread_id=77)
    fake.push_text(GROUP, 1, "@bridge_bot in topic", chat_type="supergroup", thread_id=77)
    await fake.wait_for(lambda: fake.bot_texts(GROUP) == ["echo: in topic"])
    assert engine.texts() == ["in topic"]
    assert engine.handled[0].conversation.thread == "77"
    assert fake.messages(GROUP)[-1].thread_id == 77
    [action] = fake.calls_to("sendChatAction")
    assert action.params["message_thread_id"] == 77


async def test_where_no_mention_is_needed_every_group_message_is_taken(
    fake: FakeTelegram, engine: StandInEngine
) -> None:
    """`require_mention: false` for GROUP (the rule the engine gives the adapter):
    chatter reaches the engine marked as not addressed, with its place; a
    command for another bot still does not; other groups still need a mention."""
    asked: list[tuple[str, ...]] = []

    def rule(place: tuple[str, ...]) -> bool:
        asked.append(place)
        return place[0] != f"telegram:{GROUP}"

    platform = TelegramPlatform(
        config=telegram_config(fake), handler=engine, commands=engine.commands, mention_rule=rule
    )
    engine.attach(platform.name, platform.outbox)
    await platform.start()
    try:
        fake.push_text(GROUP, 1, "just chatting", chat_type="supergroup")
        fake.push_text(GROUP, 1, "/help@other_bot", chat_type="supergroup")
        fake.push_text(-1005, 1, "elsewhere", chat_type="supergroup")
        fake.push_text(GROUP, 1, "@bridge_bot marker", chat_type="supergroup")
        await fake.wait_for(lambda: "marker" in engine.texts())
    finally:
        await platform.aclose()
    chatter, marker = engine.handled
    assert (chatter.text, chatter.addressed) == ("just chatting", False)
    assert chatter.place == (f"telegram:{GROUP}", "telegram")
    assert marker.addressed is True
    assert ("telegram:-1005", "telegram") in asked


async def test_a_photo_in_a_group_counts_when_its_caption_mentions_the_bot(
    fake: FakeTelegram, engine: StandInEngine, launch: Launch
) -> None:
    await launch()
    photo = fake.add_file(b"\x89PNG\r\n\x1a\n....", path="photos/file_1.jpg")
    fake.push_media(GROUP, 1, caption="Und das hier?", chat_type="supergroup", photo=[photo])
    fake.push_media(GROUP, 1, caption="@bridge_bot was steht da?", chat_type="supergroup",
                    photo=[photo])  # fmt: skip
    assert await _handled_before_marker(fake, engine) == ["was steht da?"]
    [message] = engine.handled[:1]
    [attachment] = message.attachments
    assert (attachment.kind, attachment.name) == ("image", "photo.jpg")
    assert photo in attachment.ref
    assert fake.downloads == [], "the adapter only describes; core decides and fetches"
