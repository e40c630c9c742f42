"""Look before posting again (issue 17.8), over the fake Discord REST API.

An earlier process posted (part of) an answer and was killed before the store
recorded the message id: the entry is pending with nothing recorded. The
restarted process reads the channel after the question
(`channel.history(after=…)`), finds its own message whose text begins the
answer, and edits it instead of posting a second one. The earlier process's
post is a plain REST call with the bot token.
"""

from __future__ import annotations

import aiohttp

from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.platforms.discord import Address, encode_address
from tests.platforms.discord.conftest import Launch
from tests.support.fake_discord import CHANNEL_ID, USER_ID, FakeDiscord
from tests.support.fakes import ScriptedProvider

ANSWER = "Das Paket kommt am Mittwoch an, sagt UPS."
LOOK = "GET /channels/*/messages"
POST = "POST /channels/*/messages"


def _provider() -> ScriptedProvider:
    return ScriptedProvider(lambda prompt: [ANSWER])


def _question(channel: int, question: int, *, group: bool, thread: bool = False) -> IncomingMessage:
    kind = ChatKind.GROUP if group else ChatKind.PRIVATE
    return IncomingMessage(
        conversation=Conversation(
            platform="discord",
            chat=str(channel),
            user=str(USER_ID),
            kind=kind,
            thread=str(question) if thread else "",
        ),
        text="Wo ist das Paket?",
        event_id=str(question),
        reply_address=encode_address(Address(channel, question if group else None, thread)),
    )


async def _rest(fake: FakeDiscord, path: str, body: dict[str, object]) -> dict[str, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{fake.api_base}{path}", json=body, headers={"Authorization": f"Bot {fake.token}"}
        ) as response,
    ):
        assert response.status in (200, 201), await response.text()
        return dict(await response.json())


async def _posted_earlier(fake: FakeDiscord, channel: int, text: str) -> int:
    """The earlier process's message, whose id the store never got."""
    return int((await _rest(fake, f"/channels/{channel}/messages", {"content": text}))["id"])


async def test_a_dm_answer_posted_before_the_kill_is_edited_not_posted_again(
    fake: FakeDiscord, launch: Launch
) -> None:
    dm = fake.dm_channel()
    question = int(fake.user_message(dm, "Wo ist das Paket?")["id"])
    partial = await _posted_earlier(fake, dm, "Das Paket kommt")
    running = await launch(provider=_provider())
    posts = len(fake.calls_to(POST))

    assert await running.bot.engine.accept(_question(dm, question, group=False))
    await running.ring()

    assert [(m.id, m.content) for m in fake.bot_messages(dm)] == [(partial, ANSWER)]
    assert len(fake.calls_to(POST)) == posts, "the answer was posted a second time"
    assert [c.status for c in fake.calls_to(LOOK)] == [200]


async def test_a_channel_answer_found_after_its_question(fake: FakeDiscord, launch: Launch) -> None:
    question = int(fake.user_message(CHANNEL_ID, "Wo ist das Paket?", mention_bot=True)["id"])
    whole = await _posted_earlier(fake, CHANNEL_ID, ANSWER)
    running = await launch(provider=_provider())

    assert await running.bot.engine.accept(_question(CHANNEL_ID, question, group=True))
    await running.ring()

    assert [m.id for m in fake.bot_messages(CHANNEL_ID)] == [whole]


async def test_another_text_or_an_older_message_is_not_taken(
    fake: FakeDiscord, launch: Launch
) -> None:
    dm = fake.dm_channel()
    await _posted_earlier(fake, dm, ANSWER)  # the answer to an older question
    question = int(fake.user_message(dm, "Wo ist das Paket?")["id"])
    await _posted_earlier(fake, dm, "Eine ganz andere Antwort.")
    running = await launch(provider=_provider())

    assert await running.bot.engine.accept(_question(dm, question, group=False))
    await running.ring()

    assert fake.bot_texts(dm) == [ANSWER, "Eine ganz andere Antwort.", ANSWER]


async def test_a_question_this_process_took_in_costs_no_lookup(
    fake: FakeDiscord, launch: Launch
) -> None:
    running = await launch(provider=_provider())
    await fake.send_dm("Wo ist das Paket?")
    await running.ring()
    await fake.send_guild_message("Und das andere?", mention_bot=True)
    await running.ring(count=2)
    assert fake.bot_texts(fake.dm_channel()) == [ANSWER]
    assert fake.bot_texts(CHANNEL_ID) == [ANSWER]
    assert not fake.calls_to(LOOK)


async def test_an_answer_in_the_thread_opened_before_the_kill_goes_on_there(
    fake: FakeDiscord, launch: Launch
) -> None:
    question = int(fake.user_message(CHANNEL_ID, "Wo ist das Paket?", mention_bot=True)["id"])
    path = f"/channels/{CHANNEL_ID}/messages/{question}/threads"
    await _rest(fake, path, {"name": "Wo ist das Paket?", "auto_archive_duration": 1440})
    partial = await _posted_earlier(fake, question, "Das Paket kommt")  # the thread's id
    running = await launch(provider=_provider(), thread_per_mention=True)
    threads, posts = len(fake.calls_to("POST /channels/*/threads")), len(fake.calls_to(POST))

    message = _question(CHANNEL_ID, question, group=True, thread=True)
    assert await running.bot.engine.accept(message)
    await running.ring()

    assert [(m.id, m.content) for m in fake.bot_messages(question)] == [(partial, ANSWER)]
    assert fake.bot_messages(CHANNEL_ID) == []
    assert len(fake.calls_to("POST /channels/*/threads")) == threads
    assert len(fake.calls_to(POST)) == posts
