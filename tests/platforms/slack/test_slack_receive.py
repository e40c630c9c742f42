"""What the Slack adapter answers, where, and exactly once, in both modes.

Real bolt + slack-sdk against `FakeSlack`, the real engine and SQLite inbox.
"""

from __future__ import annotations

import pytest

from tests.support import fake_slack_events as ev
from tests.support.fake_slack import FakeSlack

from .conftest import Launch, Running

MODES = ["socket", "http"]


async def _answered(fake: FakeSlack, channel: str, count: int = 1, within: float = 30.0) -> None:
    await fake.wait_for(lambda: len(fake.bot_texts(channel)) >= count, within)


async def _settle(run: Running) -> None:
    """Every event was acked, so it is in the inbox or was dropped; draining
    lets every answer the engine took finish, so a wrong extra one would show."""
    await run.bot.engine.drain(5.0)


@pytest.mark.parametrize("mode", MODES)
async def test_a_dm_is_answered_in_the_dm(fake: FakeSlack, launch: Launch, mode: str) -> None:
    run = await launch(mode=mode)
    await run.event(ev.dm_message("Hallo Bot"))
    await _answered(fake, ev.DM_CHANNEL)

    assert fake.bot_texts(ev.DM_CHANNEL) == ["echo: Hallo Bot"]
    reply = fake.messages(ev.DM_CHANNEL)[-1]
    assert reply.thread_ts is None, "a DM is answered at the top, not in a thread"
    assert run.bot.last_prompt_text == "Hallo Bot"


@pytest.mark.parametrize("mode", MODES)
async def test_a_mention_is_answered_in_its_thread_and_follow_ups_continue_it(
    fake: FakeSlack, launch: Launch, mode: str
) -> None:
    run = await launch(mode=mode)
    mention = ev.app_mention("Wie spät ist es?")
    await run.event(mention)
    await _answered(fake, ev.CHANNEL)

    assert fake.thread(ev.CHANNEL, mention["ts"]) == ["echo: Wie spät ist es?"]
    assert run.bot.provider.prompts[0].messages[-1].content == "Wie spät ist es?", (
        "the bot's own mention must be stripped"
    )
    # A reply in that thread, without a mention, continues the same session.
    await run.event(ev.channel_message("Und morgen?", thread_ts=mention["ts"]))
    await _answered(fake, ev.CHANNEL, 2)
    assert fake.thread(ev.CHANNEL, mention["ts"]) == [
        "echo: Wie spät ist es?",
        "echo: Und morgen?",
    ]
    second = run.bot.provider.prompts[1].messages
    assert next(m.content for m in second if m.role == "user") == "Wie spät ist es?", (
        "the follow-up did not continue the thread's session"
    )


@pytest.mark.parametrize("mode", MODES)
async def test_a_retried_event_is_acked_and_answered_once(
    fake: FakeSlack, launch: Launch, mode: str
) -> None:
    run = await launch(mode=mode)
    event = ev.dm_message("Nur einmal bitte")
    event_id = f"Ev0RETRY{mode.upper()}"
    first = await run.event(event, event_id=event_id)
    for attempt in (1, 2, 3):
        again = await run.event(event, event_id=event_id, retry_attempt=attempt)
        if mode == "http":
            assert again[0] == 200, again
    await _answered(fake, ev.DM_CHANNEL)
    await _settle(run)

    assert fake.bot_texts(ev.DM_CHANNEL) == ["echo: Nur einmal bitte"]
    assert len(run.bot.provider.prompts) == 1
    if mode == "socket":
        assert [d.event_id for d in fake.deliveries] == [event_id] * 4
        assert all(d.acked_at is not None and not d.late for d in fake.deliveries)
    else:
        assert first[0] == 200


async def test_ignored_events_never_reach_the_engine(fake: FakeSlack, launch: Launch) -> None:
    run = await launch(mode="socket")
    dm = ev.dm_message("Original")
    ignored = [
        ev.channel_message("Plain channel chatter"),  # no mention, not the bot's thread
        ev.bot_message("Another bot", channel=ev.DM_CHANNEL, bot_id="B0OTHER", user="U0OTHERBOT"),
        ev.bot_message("My own message", channel=ev.DM_CHANNEL),
        ev.bot_message("Legacy bot", channel=ev.DM_CHANNEL, legacy=True),
        ev.message_changed(dm, "Edited"),
        ev.message_deleted(dm),
        ev.channel_message("Thread nobody asked me in", thread_ts=ev.next_ts()),
    ]
    for event in ignored:
        delivery = await run.event(event)
        assert delivery.acked_at is not None, event
    await run.event(ev.dm_message("Echte Frage"))
    await _answered(fake, ev.DM_CHANNEL)
    await _settle(run)

    assert [p.messages[-1].content for p in run.bot.provider.prompts] == ["Echte Frage"]
    assert fake.bot_texts(ev.CHANNEL) == []


async def test_a_mention_inside_the_bots_thread_is_answered_once(
    fake: FakeSlack, launch: Launch
) -> None:
    """Slack sends a mention in a followed thread twice (message + app_mention)."""
    run = await launch(mode="socket")
    root = ev.app_mention("Erste Frage")
    await run.event(root)
    await _answered(fake, ev.CHANNEL)
    text = f"<@{ev.BOT_USER_ID}> Zweite Frage"
    again = ev.channel_message(text, thread_ts=root["ts"])
    await run.event(again)
    await run.event(ev.app_mention(text, thread_ts=root["ts"], ts=again["ts"]))
    await _answered(fake, ev.CHANNEL, 2)
    await _settle(run)
    assert fake.thread(ev.CHANNEL, root["ts"]) == ["echo: Erste Frage", "echo: Zweite Frage"]


async def test_a_stranger_gets_the_access_reply_naming_the_id(
    fake: FakeSlack, launch: Launch
) -> None:
    run = await launch(mode="socket")
    await run.event(ev.dm_message("Hallo?", user=ev.OTHER_USER_ID, channel="D0BOB"))
    await _answered(fake, "D0BOB")
    (reply,) = fake.bot_texts("D0BOB")
    assert f"slack:{ev.OTHER_USER_ID}" in reply
    assert "access.allow" in reply
    assert run.bot.provider.prompts == []
