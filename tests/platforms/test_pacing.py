"""Pacing on a virtual clock: the shared `RateBudget`, and Telegram's pacer
(per chat, per bot, final text before progress), with exact call times."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from chatbridge.core.ports import in_progress_phase
from chatbridge.platforms._pacing import FINAL, PROGRESS, RateBudget
from chatbridge.platforms.telegram._pacing import TelegramPacer
from tests.support.fakes import VirtualClock


async def _at(clock: VirtualClock, take: Callable[[], Awaitable[None]]) -> float:
    await take()
    return clock.now


async def test_a_burst_passes_then_calls_come_at_the_rate() -> None:
    clock = VirtualClock(start=0.0)
    budget = RateBudget(2.0, burst=3, monotonic=clock.monotonic, sleep=clock.sleep)
    calls = [asyncio.create_task(_at(clock, budget.take)) for _ in range(6)]
    await clock.advance(5.0)
    assert [c.result() for c in calls] == [0.0, 0.0, 0.0, 0.5, 1.0, 1.5]


async def test_waiting_final_calls_go_before_waiting_progress() -> None:
    clock = VirtualClock(start=0.0)
    budget = RateBudget(1.0, monotonic=clock.monotonic, sleep=clock.sleep)
    order: list[str] = []

    async def call(name: str, priority: int) -> None:
        await budget.take(priority)
        order.append(f"{name}@{clock.now:g}")

    first = asyncio.create_task(call("p0", PROGRESS))  # takes the one token at once
    await clock.settle()
    waiting = [asyncio.create_task(call(f"p{i}", PROGRESS)) for i in (1, 2)]
    await clock.settle()
    final = asyncio.create_task(call("final", FINAL))  # arrives last, goes first
    await clock.advance(3.0)
    await asyncio.gather(first, *waiting, final)
    assert order == ["p0@0", "final@1", "p1@2", "p2@3"]


async def test_a_cancelled_waiter_gives_its_place_up() -> None:
    clock = VirtualClock(start=0.0)
    budget = RateBudget(1.0, monotonic=clock.monotonic, sleep=clock.sleep)
    await budget.take()
    gone = asyncio.create_task(budget.take())
    kept = asyncio.create_task(_at(clock, budget.take))
    await clock.settle()
    gone.cancel()
    await clock.advance(2.0)
    assert kept.result() == 1.0
    assert gone.cancelled()


def test_a_budget_needs_a_rate() -> None:
    with pytest.raises(ValueError, match="positive rate"):
        RateBudget(0)


class _Recorder:
    """Stands in for PTB's request callback: records when each call went out."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.calls: list[tuple[str, Any, float]] = []

    def request(
        self, pacer: TelegramPacer, endpoint: str, chat: Any, *, progress: bool = False
    ) -> asyncio.Task[Any]:
        async def callback() -> bool:
            self.calls.append((endpoint, chat, self.clock.now))
            return True

        async def run() -> Any:
            if progress:
                in_progress_phase()
            data = {} if chat is None else {"chat_id": chat}
            return await pacer.process_request(callback, (), {}, endpoint, data, None)

        return asyncio.create_task(run())

    def times(self, endpoint: str, chat: Any) -> list[float]:
        return [t for e, c, t in self.calls if e == endpoint and c == chat]


async def test_telegram_paces_each_chat_on_its_own() -> None:
    clock = VirtualClock(start=0.0)
    pacer = TelegramPacer(monotonic=clock.monotonic, sleep=clock.sleep)
    rec = _Recorder(clock)
    for chat in (1, 2):
        for _ in range(5):
            rec.request(pacer, "sendMessage", chat)
    await clock.advance(5.0)
    # Bursts of 3, then one a second; another chat is not held up by the
    # first's pacing, only (by 1/25 s) by the bot's burst of 5 being spent.
    assert rec.times("sendMessage", 1) == [0.0, 0.0, 0.0, 1.0, 2.0]
    assert rec.times("sendMessage", 2) == pytest.approx([0.0, 0.0, 0.04, 1.0, 2.0])


async def test_a_group_gets_twenty_messages_a_minute() -> None:
    clock = VirtualClock(start=0.0)
    pacer = TelegramPacer(monotonic=clock.monotonic, sleep=clock.sleep)
    rec = _Recorder(clock)
    for _ in range(22):
        rec.request(pacer, "editMessageText", -100123)
    await clock.advance(2.0)
    # 20 pass the group's budget at once; the bot's spaces them after its burst.
    first = [0.0] * 5 + [k / 25 for k in range(1, 16)]
    assert rec.times("editMessageText", -100123) == pytest.approx(first)
    await clock.advance(10.0)
    assert rec.times("editMessageText", -100123)[20:] == pytest.approx([3.0, 6.0])


async def test_the_bot_budget_serves_final_sends_before_progress() -> None:
    clock = VirtualClock(start=0.0)
    pacer = TelegramPacer(monotonic=clock.monotonic, sleep=clock.sleep)
    rec = _Recorder(clock)
    # 40 chats' drafts (progress; not messages, so only the bot's budget applies)
    # then 5 chats' final sends, all at once.
    for chat in range(100, 140):
        rec.request(pacer, "sendMessageDraft", chat, progress=True)
    await clock.settle()
    for chat in range(200, 205):
        rec.request(pacer, "sendMessage", chat)
    await clock.advance(2.0)
    finals = [t for e, _, t in rec.calls if e == "sendMessage"]
    drafts = [t for e, _, t in rec.calls if e == "sendMessageDraft"]
    assert len(drafts) == 40
    assert drafts[:5] == [0.0] * 5  # the burst
    assert finals == pytest.approx([1 / 25, 2 / 25, 3 / 25, 4 / 25, 5 / 25])
    assert min(drafts[5:]) == pytest.approx(6 / 25)  # the rest wait for the finals
    assert max(drafts) == pytest.approx(40 / 25)
    # Never more than 30 calls in any second.
    times = sorted(t for *_, t in rec.calls)
    assert all(b - a >= 1.0 - 1e-9 for a, b in zip(times, times[30:], strict=False))


async def test_calls_without_a_chat_are_not_paced() -> None:
    clock = VirtualClock(start=0.0)
    pacer = TelegramPacer(monotonic=clock.monotonic, sleep=clock.sleep)
    rec = _Recorder(clock)
    tasks = [rec.request(pacer, "getUpdates", None) for _ in range(50)]
    await clock.settle()
    assert all(t.done() for t in tasks)
    assert rec.times("getUpdates", None) == [0.0] * 50
