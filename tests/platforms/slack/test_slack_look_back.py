"""Look before posting again (issue 17.8), over the fake Slack Web API.

An earlier process posted (part of) an answer and was killed before the store
recorded the message's `ts`: the entry is pending with nothing recorded. The
restarted process reads the thread (`conversations.replies`) or the DM
(`conversations.history`) after the question, finds its own message whose text
begins the answer, and edits it instead of posting a second one. The
earlier process is played by a plain `AsyncWebClient` posting as the bot.
"""

from __future__ import annotations

from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from chatbridge.core.models import ChatKind, Conversation, IncomingMessage
from chatbridge.platforms.slack import Address
from tests.support import fake_slack_events as ev
from tests.support.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.fakes import ScriptedProvider

from .conftest import Launch, Running

ANSWER = "Das Paket kommt am Mittwoch an, sagt UPS."
LOOKS = ("conversations.replies", "conversations.history")


def _provider() -> ScriptedProvider:
    return ScriptedProvider(lambda prompt: [ANSWER])


def _question(event: dict[str, Any]) -> IncomingMessage:
    """What the normaliser made of `event` before the kill (as the inbox holds it)."""
    channel, ts = event["channel"], event["ts"]
    dm = channel.startswith("D")
    thread = "" if dm else event.get("thread_ts") or ts
    kind = ChatKind.PRIVATE if dm else ChatKind.GROUP
    return IncomingMessage(
        Conversation("slack", channel, ev.USER_ID, thread, kind),
        "Wo ist das Paket?",
        event_id=f"Ev-{ts}",
        reply_address=Address(channel, thread, ts).encode(),
    )


async def _posted_earlier(fake: FakeSlack, channel: str, text: str, thread: str = "") -> str:
    """The earlier process's chat.postMessage, whose `ts` the store never got."""
    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.base_url)
    response = await client.chat_postMessage(channel=channel, text=text, thread_ts=thread or None)
    return str(response["ts"])


async def _answered(run: Running, fake: FakeSlack) -> None:
    await fake.wait_for(lambda: any(t == ANSWER for t in _bot_texts(fake)), 20)
    await run.bot.engine.drain(5)


def _bot_texts(fake: FakeSlack) -> list[str]:
    return [m.text for c in (ev.CHANNEL, ev.DM_CHANNEL) for m in fake.messages(c) if m.from_bot]


async def test_a_thread_answer_posted_before_the_kill_is_edited_not_posted_again(
    fake: FakeSlack, launch: Launch
) -> None:
    mention = ev.app_mention("Wo ist das Paket?")
    fake.user_message(mention)  # written before the restart
    partial = await _posted_earlier(fake, ev.CHANNEL, "Das Paket kommt", mention["ts"])
    run = await launch(provider=_provider())

    assert await run.bot.engine.accept(_question(mention))
    await _answered(run, fake)

    assert fake.thread(ev.CHANNEL, mention["ts"]) == [ANSWER]
    assert [c.params.get("ts") for c in fake.calls_to("chat.update")] == [partial]
    assert len(fake.calls_to("chat.postMessage")) == 1, "the answer was posted a second time"
    assert not fake.calls_to("chat.startStream"), "a stream was opened beside the found message"
    (look,) = fake.calls_to("conversations.replies")
    assert look.params["ts"] == mention["ts"]


async def test_a_dm_answer_sent_whole_before_the_kill_is_found_in_the_history(
    fake: FakeSlack, launch: Launch
) -> None:
    question = ev.dm_message("Wo ist das Paket?")
    fake.user_message(question)
    whole = await _posted_earlier(fake, ev.DM_CHANNEL, ANSWER)
    run = await launch(provider=_provider())

    assert await run.bot.engine.accept(_question(question))
    await _answered(run, fake)

    assert [m.text for m in fake.messages(ev.DM_CHANNEL) if m.from_bot] == [ANSWER]
    assert fake.message(ev.DM_CHANNEL, whole) is not None
    assert len(fake.calls_to("chat.postMessage")) == 1
    (look,) = fake.calls_to("conversations.history")
    assert look.params["oldest"] == question["ts"]


async def test_another_text_is_not_taken_for_the_answer(fake: FakeSlack, launch: Launch) -> None:
    question = ev.dm_message("Wo ist das Paket?")
    fake.user_message(question)
    await _posted_earlier(fake, ev.DM_CHANNEL, "Eine ganz andere Antwort.")
    run = await launch(provider=_provider())

    assert await run.bot.engine.accept(_question(question))
    await _answered(run, fake)

    texts = [m.text for m in fake.messages(ev.DM_CHANNEL) if m.from_bot]
    assert texts == ["Eine ganz andere Antwort.", ANSWER]
    assert not fake.calls_to("chat.update")


async def test_a_message_of_the_bot_before_the_question_is_not_taken(
    fake: FakeSlack, launch: Launch
) -> None:
    await _posted_earlier(fake, ev.DM_CHANNEL, ANSWER)  # an answer to an older question
    question = ev.dm_message("Wo ist das Paket?")
    fake.user_message(question)
    run = await launch(provider=_provider())

    assert await run.bot.engine.accept(_question(question))
    await fake.wait_for(lambda: _bot_texts(fake).count(ANSWER) == 2, 20)
    await run.bot.engine.drain(5)
    assert not fake.calls_to("chat.update")


async def test_a_question_this_process_took_in_costs_no_lookup(
    fake: FakeSlack, launch: Launch
) -> None:
    run = await launch(provider=_provider())
    await run.event(ev.dm_message("Wo ist das Paket?"))
    await fake.wait_for(lambda: ANSWER in _bot_texts(fake), 20)
    mention = ev.app_mention("Und das andere?")
    await run.event(mention)
    await fake.wait_for(lambda: fake.thread(ev.CHANNEL, mention["ts"]) == [ANSWER], 20)
    await run.bot.engine.drain(5)
    assert not [c for c in fake.calls if c.method in LOOKS]


async def test_a_refused_lookup_posts_the_answer_as_before(fake: FakeSlack, launch: Launch) -> None:
    fake.deny_scope("conversations.history")
    question = ev.dm_message("Wo ist das Paket?")
    fake.user_message(question)
    run = await launch(provider=_provider())

    assert await run.bot.engine.accept(_question(question))
    await _answered(run, fake)
    assert [m.text for m in fake.messages(ev.DM_CHANNEL) if m.from_bot] == [ANSWER]
    assert [c.error for c in fake.calls_to("conversations.history")] == ["missing_scope"]
