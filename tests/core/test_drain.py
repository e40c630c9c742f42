"""Draining is bounded: a task that does not stop when cancelled (it swallows
the cancellation, or hangs in its cleanup like a Redis pubsub closing on a
dead socket) is logged by name and left behind; shutdown goes on. Real
engine and scheduler on real SQLite."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from chatbridge.core.models import Conversation, IncomingMessage
from chatbridge.core.ports import Prompt, StreamEvent, TextDelta
from chatbridge.core.scheduling import LocalScheduler, _base
from tests.support.fakes import RecordingOutbox, ScriptedProvider
from tests.support.testbot import ALICE, TestBots


@pytest.fixture(autouse=True)
def _short_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stuck tasks here never stop by themselves: no need to wait 2 s."""
    monkeypatch.setattr(_base, "STOP_WITHIN", 0.1)


def _stuck(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "did not stop" in r.getMessage()]


async def test_a_background_task_that_swallows_cancellation_does_not_hold_up_the_drain(
    testbot: TestBots, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="chatbridge.core.scheduling")
    bot = await testbot()
    scheduler = bot.engine.scheduler
    assert isinstance(scheduler, LocalScheduler)
    released = asyncio.Event()
    cancels = 0

    async def swallows_cancellation() -> None:
        nonlocal cancels
        while not released.is_set():
            try:
                await released.wait()
            except asyncio.CancelledError:
                cancels += 1

    stubborn = scheduler.run_beside(swallows_cancellation(), name="stubborn listener")
    outbox = RecordingOutbox()
    bot.engine.attach("telegram", lambda message: outbox)
    conversation = Conversation("telegram", ALICE, ALICE)
    await bot.engine.handle(IncomingMessage(conversation, "Hallo", event_id="1"), outbox)
    draining = asyncio.create_task(bot.engine.drain(5.0))
    try:
        # Not a timing assertion: without a bound the drain never ends.
        finished, _ = await asyncio.wait([draining], timeout=30)
        left_behind = not stubborn.done()
    finally:
        released.set()
        await asyncio.wait([stubborn, draining])

    assert finished, "the drain waited for a task that swallows cancellation"
    assert left_behind
    assert cancels == 1
    assert _stuck(caplog) == [
        "scheduler: stubborn listener did not stop within 0.1s of being cancelled; "
        "shutting down without it"
    ]
    assert outbox.texts == ["echo: Hallo"], "the answers still had their grace"


class HangsInCleanup(ScriptedProvider):
    """Streams until cancelled, then waits for `released` before it lets the
    cancellation through (an SDK closing its connection to a dead server)."""

    def __init__(self, started: asyncio.Event, released: asyncio.Event) -> None:
        super().__init__()
        self.started, self.released = started, released

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        self.prompts.append(prompt)
        self.started.set()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.shield(self.released.wait())
        yield TextDelta("never")  # makes this an async generator; the wait never ends


async def test_a_reply_that_hangs_when_cut_is_logged_and_left_behind(
    testbot: TestBots, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="chatbridge.core.scheduling")
    started, released = asyncio.Event(), asyncio.Event()
    bot = await testbot(provider=HangsInCleanup(started, released))
    outbox = RecordingOutbox()
    bot.engine.attach("telegram", lambda message: outbox)
    conversation = Conversation("telegram", ALICE, ALICE)
    message = IncomingMessage(conversation, "Hallo", event_id="1")
    assert await bot.engine.accept(message)
    await started.wait()
    before = asyncio.all_tasks()
    draining = asyncio.create_task(bot.engine.drain(0.05))
    try:
        finished, _ = await asyncio.wait([draining], timeout=30)  # see above
    finally:
        released.set()
        await asyncio.wait(
            [draining, *(t for t in before if t.get_name().startswith("scheduler:"))]
        )

    assert finished, "the drain waited for a reply that hangs when cut"
    assert _stuck(caplog) == [
        "scheduler: LocalScheduler._drive did not stop within 0.1s of being cancelled; "
        "shutting down without it"
    ]
    assert [e.key for e in await bot.engine.store.inbox_pending()] == ["telegram:1"], (
        "the cut reply stays for the restart"
    )
