"""Slack native streams through the real engine and slack-sdk: thread replies
stream with chat.startStream/appendStream/stopStream; plain DMs, `native_stream:
false` and refused streams use chat.postMessage + chat.update, losing nothing."""

from __future__ import annotations

import logging

import pytest

from tests.support import fake_slack_events as ev
from tests.support.fake_slack import FakeSlack
from tests.support.fakes import ScriptedProvider

from .conftest import Launch

ANSWER = " ".join(f"Schritt{i}" for i in range(120)) + "."
STREAM_CALLS = ("chat.startStream", "chat.appendStream", "chat.stopStream")
STREAM_LOG = "chatbridge.platforms.slack._stream"


def _provider(text: str = ANSWER, size: int = 15) -> ScriptedProvider:
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    return ScriptedProvider(lambda prompt: pieces, chunk_delay=0.005)


def _methods(fake: FakeSlack) -> list[str]:
    wanted = {"chat.postMessage", "chat.update", *STREAM_CALLS}
    return [c.method for c in fake.calls if c.method in wanted]


async def _answered(fake: FakeSlack, channel: str, thread_ts: str, count: int = 1) -> None:
    """Until `count` bot replies in the thread show the whole answer, no stream open."""

    def done() -> bool:
        replies = [m for m in fake.messages(channel) if m.from_bot and m.thread_ts == thread_ts]
        finished = [m for m in replies if m.text == ANSWER and not m.streaming]
        return len(finished) >= count

    await fake.wait_for(done, 10)


async def test_a_channel_mention_streams_natively_in_its_thread(
    fake: FakeSlack, launch: Launch
) -> None:
    run = await launch(provider=_provider())
    mention = ev.app_mention("Wie geht es weiter?")
    await run.event(mention)
    await _answered(fake, ev.CHANNEL, mention["ts"])
    await run.bot.engine.drain(2.0)

    methods = _methods(fake)
    assert methods[0] == "chat.startStream"
    assert methods.count("chat.appendStream") >= 1
    assert methods[-1] == "chat.stopStream"
    assert methods.count("chat.stopStream") == 1
    assert "chat.postMessage" not in methods
    assert "chat.update" not in methods
    start = fake.calls_to("chat.startStream")[0].params
    assert start["thread_ts"] == mention["ts"]
    assert (start["recipient_user_id"], start["recipient_team_id"]) == (ev.USER_ID, ev.TEAM_ID)
    assert all(c.error is None for c in fake.calls if c.method in STREAM_CALLS)
    assert fake.thread(ev.CHANNEL, mention["ts"]) == [ANSWER]


async def test_an_assistant_thread_in_a_dm_streams_without_recipients(
    fake: FakeSlack, launch: Launch
) -> None:
    run = await launch(provider=_provider())
    root = ev.next_ts()
    await run.event(ev.dm_message("Wie geht es weiter?", thread_ts=root))
    await _answered(fake, ev.DM_CHANNEL, root)
    await run.bot.engine.drain(2.0)
    methods = _methods(fake)
    assert methods.count("chat.startStream") == 1
    assert "chat.update" not in methods
    start = fake.calls_to("chat.startStream")[0].params
    assert "recipient_user_id" not in start


async def test_a_plain_dm_answer_uses_chat_update(fake: FakeSlack, launch: Launch) -> None:
    run = await launch(provider=_provider())
    await run.event(ev.dm_message("Wie geht es weiter?"))
    await fake.wait_for(lambda: fake.bot_texts(ev.DM_CHANNEL) == [ANSWER], 10)
    await run.bot.engine.drain(2.0)
    methods = _methods(fake)
    assert not set(methods) & set(STREAM_CALLS)
    assert methods.count("chat.postMessage") == 1
    assert methods.count("chat.update") >= 1


async def test_native_stream_false_streams_thread_replies_with_chat_update(
    fake: FakeSlack, launch: Launch
) -> None:
    run = await launch(provider=_provider(), native_stream=False)
    mention = ev.app_mention("Wie geht es weiter?")
    await run.event(mention)
    await _answered(fake, ev.CHANNEL, mention["ts"])
    await run.bot.engine.drain(2.0)
    methods = _methods(fake)
    assert not set(methods) & set(STREAM_CALLS)
    assert methods.count("chat.postMessage") == 1
    assert methods.count("chat.update") >= 1
    assert fake.thread(ev.CHANNEL, mention["ts"]) == [ANSWER]


async def test_a_refused_stream_falls_back_to_chat_update_for_that_channel(
    fake: FakeSlack, launch: Launch, caplog: pytest.LogCaptureFixture
) -> None:
    fake.refuse_streams()
    run = await launch(provider=_provider())
    first, second = ev.app_mention("Erste Frage"), ev.app_mention("Zweite Frage")
    with caplog.at_level(logging.WARNING, logger=STREAM_LOG):
        await run.event(first)
        await _answered(fake, ev.CHANNEL, first["ts"])
        before = len(_methods(fake))
        await run.event(second)
        await _answered(fake, ev.CHANNEL, second["ts"])
    await run.bot.engine.drain(2.0)
    methods = _methods(fake)
    assert methods[0] == "chat.startStream", "the stream was tried first"
    assert methods[:before].count("chat.postMessage") == 1
    assert methods[:before].count("chat.update") >= 1
    assert "chat.startStream" not in methods[before:], "that channel no longer tries streams"
    assert fake.thread(ev.CHANNEL, first["ts"]) == [ANSWER]
    assert fake.thread(ev.CHANNEL, second["ts"]) == [ANSWER]
    refusals = [r for r in caplog.records if "startStream refused" in r.getMessage()]
    assert len(refusals) == 1


async def test_a_stream_that_stops_midway_is_finished_with_chat_update_on_its_message(
    fake: FakeSlack, launch: Launch
) -> None:
    fake.stream_appends = 2  # then message_not_in_streaming_state, as after Slack's ~5 min
    run = await launch(provider=_provider())
    mention = ev.app_mention("Wie geht es weiter?")
    await run.event(mention)
    await _answered(fake, ev.CHANNEL, mention["ts"])
    await run.bot.engine.drain(2.0)

    refused = [c for c in fake.calls_to("chat.appendStream") if c.error]
    assert [c.error for c in refused] == ["message_not_in_streaming_state"]
    stream_ts = fake.calls_to("chat.appendStream")[0].params["ts"]
    updates = fake.calls_to("chat.update")
    assert updates, "the rest came by chat.update"
    assert {c.params["ts"] for c in updates} == {stream_ts}, "on the stream's own message"
    assert "chat.postMessage" not in _methods(fake), "no second message"
    assert fake.thread(ev.CHANNEL, mention["ts"]) == [ANSWER]


async def test_an_answer_outgrowing_one_message_stops_the_stream_and_goes_on_in_messages(
    fake: FakeSlack, launch: Launch
) -> None:
    lines = [f"Zeile {i:03d}: die Lieferung ist unterwegs." for i in range(300)]
    text = "\n".join(lines)
    run = await launch(provider=_provider(text, 120))
    mention = ev.app_mention("Alles bitte")
    await run.event(mention)
    await fake.wait_for(
        lambda: any("Zeile 299" in t for t in fake.thread(ev.CHANNEL, mention["ts"])), 15
    )
    await run.bot.engine.drain(2.0)

    methods = _methods(fake)
    assert methods.count("chat.startStream") == 1
    assert methods.count("chat.stopStream") == 1
    assert methods.index("chat.stopStream") < methods.index("chat.postMessage")
    texts = fake.thread(ev.CHANNEL, mention["ts"])
    assert len(texts) >= 3
    assert all(len(t) <= 3_500 for t in texts)
    shown = "\n".join(texts)
    assert all(shown.count(line) == 1 for line in lines), "nothing lost, nothing twice"
    assert all(len(str(c.params.get("markdown_text", ""))) <= 12_000 for c in fake.calls)
