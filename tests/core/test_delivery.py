"""Splitting at the platform limit and throttled streaming (core/delivery.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from chatbridge.core.delivery import StreamingReply, split_message
from chatbridge.core.models import Conversation, IncomingMessage
from chatbridge.core.ports import DeliveryError, DeliveryRetry
from tests.support.fakes import RecordingOutbox, ScriptedProvider, VirtualClock
from tests.support.testbot import TestBots


def _fences_balanced(chunk: str) -> bool:
    return sum(1 for line in chunk.splitlines() if line.strip().startswith("```")) % 2 == 0


def test_short_text_is_one_chunk() -> None:
    assert split_message("hello", 4096) == ["hello"]


def test_ten_thousand_chars_split_without_loss() -> None:
    text = "\n".join(f"Zeile {i}: " + "wort " * 12 for i in range(160))
    assert len(text) > 10_000
    chunks = split_message(text, 4096)
    assert len(chunks) == 3
    assert all(len(c) <= 4096 for c in chunks)
    assert " ".join(chunks).split() == text.split()


def test_code_block_is_closed_and_reopened_across_chunks() -> None:
    code = "\n".join(f"value_{i} = {i}" for i in range(400))
    text = f"Here is the code:\n\n```python\n{code}\n```\nDone."
    chunks = split_message(text, 1000)
    assert len(chunks) > 3
    for chunk in chunks:
        assert len(chunk) <= 1000
        assert _fences_balanced(chunk), chunk[-40:]
    for chunk in chunks[1:-1]:
        assert chunk.startswith("```python\n")
    joined = "\n".join(chunks)
    for i in range(400):
        assert f"value_{i} = {i}" in joined


def test_a_word_longer_than_the_limit_is_hard_split() -> None:
    assert split_message("a" * 25, 10) == ["a" * 10, "a" * 10, "a" * 5]


class TimedOutbox(RecordingOutbox):
    """Records when (on `clock`) each send/edit reached the platform."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.clock = clock
        self.at: list[tuple[str, str, float]] = []  # (kind, ref, time)

    async def send(self, text: str) -> str:
        ref = await super().send(text)
        self.at.append(("send", ref, self.clock()))
        return ref

    async def edit(self, message: str, text: str) -> None:
        await super().edit(message, text)
        self.at.append(("edit", message, self.clock()))


def _paced(outbox: RecordingOutbox, clock: VirtualClock) -> StreamingReply:
    return StreamingReply(outbox, monotonic=clock.monotonic, sleep=clock.sleep)


def _parts(n: int) -> str:
    return " ".join(f"part{i}" for i in range(n))


# Steps and intervals are exact in binary, so virtual times compare exactly.
STEP, INTERVAL = 0.03125, 0.0625


async def test_streaming_edits_are_throttled() -> None:
    clock = VirtualClock()
    t0 = clock.now
    outbox = TimedOutbox(clock=clock.monotonic, edit_interval=INTERVAL)
    reply = _paced(outbox, clock)
    for i in range(10):  # a delta every half interval
        await reply.push(f"part{i} ")
        await clock.advance(STEP)
    await reply.finish()
    # First message one interval after the first text, then one edit per
    # interval, each with the text pushed so far; the final text was already
    # shown, so finishing adds no call.
    assert outbox.at == [
        ("send", "1", t0 + 2 * STEP),
        ("edit", "1", t0 + 4 * STEP),
        ("edit", "1", t0 + 6 * STEP),
        ("edit", "1", t0 + 8 * STEP),
        ("edit", "1", t0 + 10 * STEP),
    ]
    assert [text for _, _, text in outbox.calls] == [_parts(n) for n in (2, 4, 6, 8, 10)]


async def test_a_quick_answer_is_one_send_and_no_edit() -> None:
    clock = VirtualClock()
    outbox = RecordingOutbox(edit_interval=1.0)
    reply = _paced(outbox, clock)
    for word in ("Das ", "Paket ", "kommt ", "Mittwoch."):
        await reply.push(word)
        await clock.advance(0.0078125)  # well inside the first edit interval
    await reply.finish()
    assert outbox.calls == [("send", "1", "Das Paket kommt Mittwoch.")]


async def test_the_final_edit_waits_out_the_edit_interval() -> None:
    clock = VirtualClock()
    t0 = clock.now
    outbox = TimedOutbox(clock=clock.monotonic, edit_interval=INTERVAL)
    reply = _paced(outbox, clock)
    await reply.push("Das Paket ")
    await clock.advance(INTERVAL)  # the progress task posts the first message
    assert outbox.calls == [("send", "1", "Das Paket")]
    await reply.push("kommt am Mittwoch.")
    await clock.advance(STEP)  # only half the interval has passed since that send
    finishing = asyncio.ensure_future(reply.finish())
    await clock.settle()
    assert not finishing.done(), "the final edit did not wait for the interval"
    await clock.advance(STEP)
    await finishing
    assert outbox.at == [("send", "1", t0 + INTERVAL), ("edit", "1", t0 + 2 * INTERVAL)]
    assert outbox.calls[-1] == ("edit", "1", "Das Paket kommt am Mittwoch.")


async def test_final_delivery_honours_retry_after() -> None:
    now = [100.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    outbox = TimedOutbox(clock=lambda: now[0])
    outbox.floods = [2.5]
    await StreamingReply(outbox, monotonic=lambda: now[0], sleep=sleep).finish("Hallo")
    assert slept == [2.5]
    assert outbox.at == [("send", "1", 102.5)]
    assert outbox.texts == ["Hallo"]


async def test_a_slow_platform_does_not_hold_up_the_stream() -> None:
    release = asyncio.Event()

    class SlowOutbox(RecordingOutbox):
        async def send(self, text: str):
            await release.wait()  # a rate limiter holding the call
            return await super().send(text)

    outbox = SlowOutbox(edit_interval=0.0)
    reply = StreamingReply(outbox)

    async def stream() -> None:
        for i in range(50):
            await reply.push(f"w{i} ")

    # All 50 pushes return while the platform still holds the first call.
    pushing = asyncio.ensure_future(stream())
    await VirtualClock().settle()
    assert pushing.done(), "push waited for the platform"
    assert outbox.calls == []
    release.set()
    await reply.finish()
    assert len(outbox.messages) == 1
    assert outbox.last.split() == [f"w{i}" for i in range(50)]


async def test_streaming_past_the_limit_continues_in_a_new_message() -> None:
    outbox = RecordingOutbox(max_chars=100, edit_interval=0.0)
    reply = StreamingReply(outbox)
    for i in range(30):
        await reply.push(f"word{i:02d} ")
    await reply.finish()
    assert len(outbox.messages) == 3
    assert " ".join(outbox.texts).split() == [f"word{i:02d}" for i in range(30)]


async def test_flood_control_during_streaming_holds_every_later_call() -> None:
    clock = VirtualClock()
    t0 = clock.now
    outbox = TimedOutbox(clock=clock.monotonic, edit_interval=0.0)
    reply = _paced(outbox, clock)
    outbox.floods = [3.0]
    await reply.push("first ")
    await clock.settle()  # the progress send runs into flood control
    assert outbox.messages == []
    assert outbox.floods == [], "the progress call never reached the platform"
    await reply.push("second ")
    await clock.advance(2.5)  # inside the flood window: no call attempted
    assert outbox.calls == []
    outbox.floods = [2.0]
    finishing = asyncio.ensure_future(reply.finish())
    await clock.advance(0.5)  # the first flood is over: the final send meets a second one
    assert outbox.floods == []
    assert outbox.calls == []
    await clock.advance(2.0)
    await finishing
    assert outbox.at == [("send", "1", t0 + 5.0)]
    assert outbox.last == "first second"


def test_limits_can_count_utf16_units_like_telegram() -> None:
    def utf16(text: str) -> int:
        return len(text.encode("utf-16-le")) // 2

    text = "📦 Paket " * 600  # every emoji is two UTF-16 units
    chunks = split_message(text, 4096, utf16)
    assert all(utf16(chunk) <= 4096 for chunk in chunks)
    assert any(len(chunk) > 3500 for chunk in chunks), "chunks should still be near the limit"
    assert " ".join(chunks).split() == text.split()


async def test_a_pause_in_the_stream_still_shows_the_latest_text() -> None:
    release = asyncio.Event()

    class SlowOutbox(RecordingOutbox):
        async def send(self, text: str):
            await release.wait()
            return await super().send(text)

    clock = VirtualClock()
    outbox = SlowOutbox(edit_interval=INTERVAL)
    reply = _paced(outbox, clock)
    await reply.push("Das Paket ")
    await clock.advance(INTERVAL)  # the first progress call is held by the platform
    await reply.push("kommt am Mittwoch.")  # the model then pauses
    release.set()
    await clock.settle()
    assert outbox.calls == [("send", "1", "Das Paket")]
    await clock.advance(INTERVAL)  # no more deltas, no finish yet
    assert outbox.last == "Das Paket kommt am Mittwoch."
    await reply.finish()
    assert outbox.calls[-1] == ("edit", "1", "Das Paket kommt am Mittwoch.")
    assert len(outbox.calls) == 2


@pytest.mark.parametrize("limit", [1, 2, 8, 16, 63, 64, 65, 100])
def test_tiny_limits_always_terminate_and_respect_the_limit(limit: int) -> None:
    text = "```python\n" + "x = 1\n\n\n" * 30 + "```\n\nEnde " * 3
    chunks = split_message(text, limit)
    assert all(len(chunk) <= limit for chunk in chunks)
    assert "".join("".join(chunks).split()).count("x=1") >= 30


async def test_flood_control_is_waited_out_within_the_budget_then_raised() -> None:
    outbox = RecordingOutbox(edit_interval=None)
    outbox.floods = [60.0, 60.0, 60.0, 60.0]  # 4 x 60 s > FLOOD_BUDGET (180 s)
    now = [100.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    reply = StreamingReply(outbox, monotonic=lambda: now[0], sleep=sleep)
    with pytest.raises(DeliveryRetry):
        await reply.finish("Hallo")
    assert sum(slept) == pytest.approx(180.0), "it gave up before the budget was spent"
    assert outbox.messages == []


async def test_flood_control_within_the_budget_delivers_the_answer() -> None:
    outbox = RecordingOutbox(edit_interval=None)
    outbox.floods = [60.0, 60.0, 59.0]
    now = [100.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    await StreamingReply(outbox, monotonic=lambda: now[0], sleep=sleep).finish("Hallo")
    assert outbox.texts == ["Hallo"]


async def test_an_answer_the_platform_will_not_take_gets_one_notice(testbot: TestBots) -> None:
    bot = await testbot(provider=ScriptedProvider("Antwort"), allow=("telegram:1",))
    outbox = RejectingOutbox()
    message = IncomingMessage(Conversation("telegram", "1", "1"), "Frage", event_id="9")
    await bot.engine.handle(message, outbox)
    assert outbox.attempts == ["Antwort", UNDELIVERED_DE]
    assert await bot.engine.store.ring("telegram:1", since=0.0) == []


# The notice as a user reads it (the bot's default language is German).
UNDELIVERED_DE = (
    "Entschuldige, der Chatdienst hat meine Antwort nicht angenommen (Ratenlimit "
    "oder Ablehnung); bitte frag gleich noch einmal."
)


class RejectingOutbox(RecordingOutbox):
    """Refuses the answer for good; takes the notice that follows."""

    def __init__(self) -> None:
        super().__init__(edit_interval=None)
        self.attempts: list[str] = []

    async def send(self, text: str) -> str:
        self.attempts.append(text)
        if len(self.attempts) == 1:
            raise DeliveryError("telegram sendMessage: Forbidden: bot was blocked by the user")
        return await super().send(text)
