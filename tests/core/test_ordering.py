"""Per-conversation ordering, redelivery, cancellation and failures (behaviour 7)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from chatbridge.core.engine import EngineSettings
from chatbridge.core.models import Conversation, IncomingMessage
from chatbridge.core.ports.store import StoreError
from chatbridge.core.scheduling import LocalScheduler
from chatbridge.providers.base import ProviderUnavailable
from chatbridge.providers.fallback import FallbackProvider
from tests.support.fakes import RecordingOutbox, ScriptedProvider
from tests.support.testbot import ALICE, TestBot, TestBots


class ConcurrencyProbe(ScriptedProvider):
    """Counts how many streams run at once."""

    def __init__(self) -> None:
        super().__init__()
        self.running = 0
        self.peak = 0

    async def stream(self, prompt):
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(0.05)
            async for event in super().stream(prompt):
                yield event
        finally:
            self.running -= 1


async def test_one_conversation_is_answered_in_order(testbot: TestBots) -> None:
    probe = ConcurrencyProbe()
    bot = await testbot(provider=probe)
    await asyncio.gather(*(bot.say(f"m{i}") for i in range(4)))
    assert probe.peak == 1
    contents = [p.messages[-1].content for p in probe.prompts]
    assert contents == ["m0", "m1", "m2", "m3"]
    assert len(probe.prompts[-1].messages) == 7, "each message saw the previous turns"


async def test_different_conversations_run_concurrently(testbot: TestBots) -> None:
    probe = ConcurrencyProbe()
    bot = await testbot(provider=probe)
    await asyncio.gather(bot.say("a", user=ALICE), bot.say("b", user="42"))
    assert probe.peak == 2


async def test_a_redelivered_event_gets_exactly_one_answer(bot: TestBot) -> None:
    first = await bot.say("Hallo", event_id="telegram:1001")
    second = await bot.say("Hallo", event_id="telegram:1001")
    assert first == "echo: Hallo"
    assert second == ""
    assert len(bot.provider.prompts) == 1


async def test_when_every_provider_fails_the_user_is_told_and_nothing_is_stored(
    testbot: TestBots,
) -> None:
    def down(name: str) -> ScriptedProvider:
        return ScriptedProvider(
            lambda prompt: [ProviderUnavailable(f"{name} is down", provider=name)], name=name
        )

    chain = FallbackProvider([down("main"), down("backup")])
    bot = await testbot(provider=chain)
    reply = await bot.say("Check wo das Chemitek-Paket bleibt")
    assert "main, backup" in reply
    assert "noch einmal" in reply
    assert len(bot.outboxes[-1].messages) == 1
    assert await bot.engine.store.ring(f"telegram:{ALICE}", since=0.0) == []
    assert await bot.engine.store.load_session(f"telegram:{ALICE}::{ALICE}") is None


async def test_a_stream_broken_after_text_keeps_the_text_and_stores_nothing(
    testbot: TestBots,
) -> None:
    provider = ScriptedProvider(
        lambda prompt: ["UPS Tracking 1Z999", ProviderUnavailable("dropped", provider="main")]
    )
    bot = await testbot(provider=provider)
    reply = await bot.say("Paket?")
    assert reply.startswith("UPS Tracking 1Z999")
    assert "abgebrochen" in reply
    assert await bot.engine.store.ring(f"telegram:{ALICE}", since=0.0) == []


async def test_new_cancels_the_reply_in_flight(testbot: TestBots) -> None:
    gate = asyncio.Event()
    provider = ScriptedProvider(lambda prompt: ["never shown"], gate=gate)
    bot = await testbot(provider=provider)
    pending = asyncio.create_task(bot.say("lange Frage"))
    await asyncio.sleep(0.01)
    await bot.say("/new")
    await asyncio.wait_for(pending, 1.0)
    assert provider.cancelled == 1
    assert await bot.engine.store.ring(f"telegram:{ALICE}", since=0.0) == []


async def test_cancel_policy_lets_a_newer_message_replace_the_reply(testbot: TestBots) -> None:
    gate = asyncio.Event()
    provider = ScriptedProvider(lambda prompt: ["antwort"], gate=gate)
    settings = replace(EngineSettings(), cancel_on_new_message=True)
    bot = await testbot(provider=provider, settings=settings)
    first = asyncio.create_task(bot.say("erste"))
    await asyncio.sleep(0.01)
    second = asyncio.create_task(bot.say("zweite"))
    await asyncio.sleep(0.01)
    gate.set()
    assert await asyncio.wait_for(first, 1.0) == ""
    assert await asyncio.wait_for(second, 1.0) == "antwort"
    assert provider.cancelled == 1
    ring = await bot.engine.store.ring(f"telegram:{ALICE}", since=0.0)
    assert [e.user_message for e in ring] == ["zweite"]


async def test_drain_cancels_replies_that_outlive_the_grace(testbot: TestBots) -> None:
    provider = ScriptedProvider(lambda prompt: ["x"], gate=asyncio.Event())
    bot = await testbot(provider=provider)
    pending = asyncio.create_task(bot.say("hängt"))
    await asyncio.sleep(0.01)
    await bot.engine.drain(0.05)
    await asyncio.wait_for(pending, 1.0)
    assert provider.cancelled == 1


async def test_a_store_outage_at_intake_refuses_the_message(testbot: TestBots) -> None:
    bot = await testbot()
    await bot.engine.store.aclose()  # every store call now fails with StoreError
    # The inbox cannot take it: accept raises, so the platform does not
    # acknowledge and delivers it again later; nothing was answered.
    with pytest.raises(StoreError):
        await bot.say("Hallo")
    assert bot.outboxes[-1].messages == []
    assert bot.provider.prompts == []


async def test_a_store_outage_after_intake_gets_one_sentence_not_silence(testbot: TestBots) -> None:
    bot = await testbot()
    outbox = RecordingOutbox()
    bot.engine.attach("telegram", lambda message: outbox)
    conversation = Conversation(platform="telegram", chat=ALICE, user=ALICE)
    assert await bot.engine.accept(IncomingMessage(conversation, "Hallo", event_id="7"))
    await bot.engine.store.aclose()  # the store goes away before the answer starts
    for _ in range(200):
        if outbox.messages:
            break
        await asyncio.sleep(0.005)
    assert outbox.texts == [
        "Mein Gedächtnis ist gerade nicht erreichbar. Bitte versuch es später noch einmal."
    ]
    assert bot.provider.prompts == []


async def test_cancel_policy_answers_only_the_newest_of_a_burst(testbot: TestBots) -> None:
    gate = asyncio.Event()
    provider = ScriptedProvider(lambda prompt: [f"zu {prompt.messages[-1].content}"], gate=gate)
    settings = replace(EngineSettings(), cancel_on_new_message=True)
    bot = await testbot(provider=provider, settings=settings)
    burst = []
    for text in ("m1", "m2", "m3"):
        burst.append(asyncio.create_task(bot.say(text)))
        await asyncio.sleep(0)
    await asyncio.sleep(0.01)
    gate.set()
    replies = await asyncio.wait_for(asyncio.gather(*burst), 2.0)
    assert replies == ["", "", "zu m3"]
    ring = await bot.engine.store.ring(f"telegram:{ALICE}", since=0.0)
    assert [e.user_message for e in ring] == ["m3"]
    scheduler = bot.engine.scheduler
    assert isinstance(scheduler, LocalScheduler)
    if scheduler._tasks:  # the drivers end right after the last close
        await asyncio.wait(set(scheduler._tasks), timeout=5)
    assert scheduler.idle()
    assert scheduler._queues == {}, "bookkeeping must not grow"
    assert scheduler._drivers == {}
    assert scheduler._queued == set()
    assert scheduler._inflight == {}
    assert len(scheduler._locks) == 0


async def test_a_failing_typing_indicator_never_ends_a_good_answer(testbot: TestBots) -> None:
    bot = await testbot()

    class BrokenTyping(RecordingOutbox):
        async def typing(self) -> None:
            raise RuntimeError("typing endpoint exploded")

    outbox = BrokenTyping()
    conversation = Conversation(platform="telegram", chat=ALICE, user=ALICE)
    await bot.engine.handle(IncomingMessage(conversation=conversation, text="Hallo"), outbox)
    assert outbox.texts == ["echo: Hallo"]
