"""Scheduling by the platform's own order (issue 15): a conversation's pending
messages are answered oldest first by Telegram `message_id`, Slack `ts` or the
Discord snowflake, whatever order they reached the inbox in. Real SQLite."""

from __future__ import annotations

from pathlib import Path

from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.core.models import Conversation, InboxEntry, IncomingMessage
from chatbridge.platforms.slack._filters import ts_order
from chatbridge.stores.sqlite import SqliteStore
from tests.support.closing import Closing
from tests.support.fakes import ManualClock, RecordingOutbox, ScriptedProvider
from tests.support.testbot import ALICE


async def test_pending_messages_are_answered_in_the_platforms_order(
    tmp_path: Path, closing: Closing
) -> None:
    clock = ManualClock()
    store = SqliteStore(tmp_path / "bot.db", max_entries=20)
    await store.open()
    closing(store)
    conversation = Conversation("telegram", ALICE, ALICE)
    now = clock.now()
    # Reached the inbox in another order than Telegram numbered them (e.g.
    # received by replicas whose clocks differ, or fetched late).
    for text, message_id, age in (("zweite", 11, 30), ("dritte", 12, 20), ("erste", 10, 10)):
        message = IncomingMessage(conversation, text, event_id=text, order=message_id)
        assert await store.inbox_add(InboxEntry(f"telegram:{text}", message, now - age))
    assert [e.message.order for e in await store.inbox_pending_of(conversation)] == [11, 12, 10]
    provider = ScriptedProvider(lambda prompt: [f"zu {prompt.messages[-1].content}"])
    engine = Engine(
        EngineSettings(language="de"),
        store=store,
        provider=provider,
        access=AccessPolicy(allow=(f"telegram:{ALICE}",)),
        clock=clock,
    )
    outbox = RecordingOutbox()
    engine.attach("telegram", lambda message: outbox)
    assert await engine.resume() == 3
    await engine.drain(5.0)
    assert outbox.texts == ["zu erste", "zu zweite", "zu dritte"]
    assert [len(p.messages) for p in provider.prompts] == [1, 3, 5], "each saw the ones before"
    assert await store.inbox_pending() == []


def test_a_slack_ts_orders_as_microseconds() -> None:
    assert ts_order("1700000000.000200") < ts_order("1700000000.001")
    assert ts_order("1700000000.5") == 1_700_000_000_500_000
    assert ts_order("not-a-ts") == 0
    assert ts_order("") == 0


async def test_the_order_survives_the_inbox(tmp_path: Path, closing: Closing) -> None:
    store = SqliteStore(tmp_path / "bot.db", max_entries=20)
    await store.open()
    closing(store)
    conversation = Conversation("discord", "5", "6")
    message = IncomingMessage(conversation, "hi", event_id="1", order=1_234_567_890_123_456_789)
    assert await store.inbox_add(InboxEntry("discord:1", message, 1000.0))
    (entry,) = await store.inbox_pending_of(conversation)
    assert entry.message == message
    assert await store.inbox_pending_of(Conversation("discord", "5", "7")) == []
