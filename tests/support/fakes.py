"""In-process fakes for chatbridge's own Protocols (Clock, Provider, Outbox,
MessageHandler).

SDKs are never faked here: those get local fake servers. These stand in for
our own small interfaces so engine tests can script time and streams.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from chatbridge.core.models import IncomingMessage, Usage
from chatbridge.platforms.base import DeliveryRetry, PlatformLimits
from chatbridge.providers.base import Prompt, ProviderError, StreamEvent, TextDelta, UsageReport


def latest_noon() -> float:
    """The most recent 12:00 local time that is not in the future."""
    now = datetime.now().astimezone()
    noon = now.replace(hour=12, minute=0, second=0, microsecond=0)
    return (noon if noon <= now else noon - timedelta(days=1)).timestamp()


class ManualClock:
    """Wall time that moves only when a test says so."""

    def __init__(self, start: float | None = None) -> None:
        # Real time by default: forget tombstones are stamped with wall time,
        # and platform fakes stamp messages with it. A test that counts what
        # happened "today" starts at `latest_noon()`, so it never crosses midnight.
        self.value = float(int(time.time())) if start is None else start

    def now(self) -> float:
        return self.value

    def advance(self, seconds: float) -> None:
        self.value += seconds


class VirtualClock:
    """Monotonic time and `sleep` for code that takes both (`StreamingReply`):
    a sleeper wakes only when the test advances the clock past its moment,
    so pacing is exact however busy the machine is.

    `advance` wakes sleepers in time order and lets the event loop run what
    they started (a bounded number of turns, no real waiting) before it moves on.
    """

    SETTLE_TURNS = 50  # loop turns after each wake-up; in-memory fakes need a handful

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = 0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._order += 1
        heapq.heappush(self._sleepers, (self.now + max(seconds, 0.0), self._order, future))
        await future

    async def settle(self) -> None:
        """Let every task run until it waits on the clock or on something else."""
        for _ in range(self.SETTLE_TURNS):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        target = self.now + seconds
        await self.settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            at, _, future = heapq.heappop(self._sleepers)
            self.now = max(self.now, at)
            if not future.done():  # a sleeper cancelled meanwhile stays asleep
                future.set_result(None)
            await self.settle()
        self.now = target


Script = Callable[[Prompt], Sequence[str | Exception]]


class ScriptedProvider:
    """Answers each prompt with scripted deltas; an Exception item is raised there.

    Every prompt is recorded so tests can assert exactly what the LLM saw.
    """

    def __init__(
        self,
        answer: str | Script = "ok",
        *,
        name: str = "scripted",
        gate: asyncio.Event | None = None,
        chunk_delay: float = 0.0,
    ) -> None:
        self.name = name
        self.label = name
        self.model = "scripted-model"
        self.prompts: list[Prompt] = []
        self.cancelled = 0
        self._answer = answer
        self._gate = gate
        self._chunk_delay = chunk_delay  # like a model producing tokens over time

    def _items(self, prompt: Prompt) -> Sequence[str | Exception]:
        if callable(self._answer):
            return self._answer(prompt)
        return [self._answer]

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        self.prompts.append(prompt)
        try:
            for item in self._items(prompt):
                if self._gate is not None:
                    await self._gate.wait()
                if isinstance(item, Exception):
                    raise item
                yield TextDelta(item)
                if self._chunk_delay:
                    await asyncio.sleep(self._chunk_delay)
            yield UsageReport(Usage(input_tokens=10, output_tokens=5))
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    async def aclose(self) -> None:
        return None


def failing(message: str = "down") -> Script:
    return lambda prompt: [ProviderError(message, provider="main")]


@dataclass
class Posted:
    id: int
    text: str
    edits: list[str] = field(default_factory=list)


class RecordingOutbox:
    """Keeps the chat as a user would see it; can inject flood control."""

    def __init__(
        self,
        *,
        max_chars: int = 4096,
        edit_interval: float | None = None,
        typing_interval: float | None = None,
        edits_after_restart: bool = True,
    ) -> None:
        self.limits = PlatformLimits(
            max_chars=max_chars,
            edit_interval=edit_interval,
            typing_interval=typing_interval,
            edits_after_restart=edits_after_restart,
        )
        self.messages: list[Posted] = []
        self.calls: list[tuple[str, str, str]] = []  # ("send"|"edit", ref, text), in order
        self.typing_calls = 0
        self.floods: list[float] = []  # retry_after values to raise on the next calls

    def _maybe_flood(self) -> None:
        if self.floods:
            raise DeliveryRetry(self.floods.pop(0))

    async def send(self, text: str) -> str:
        """Returns the message's reference, a str like a real outbox's."""
        self._maybe_flood()
        assert len(text) <= self.limits.max_chars, "delivery sent an over-long message"
        posted = Posted(len(self.messages) + 1, text)
        self.messages.append(posted)
        self.calls.append(("send", str(posted.id), text))
        return str(posted.id)

    def seed(self, text: str) -> str:
        """A message posted before a restart (by an earlier outbox); its ref."""
        posted = Posted(len(self.messages) + 1, text)
        self.messages.append(posted)
        return str(posted.id)

    async def edit(self, message: str, text: str) -> None:
        assert isinstance(message, str), f"edit got {message!r}, not a str ref"
        self._maybe_flood()
        assert len(text) <= self.limits.max_chars, "delivery edited past the limit"
        posted = self.messages[int(message) - 1]
        posted.edits.append(text)
        posted.text = text
        self.calls.append(("edit", message, text))

    async def typing(self) -> None:
        self.typing_calls += 1

    @property
    def texts(self) -> list[str]:
        return [m.text for m in self.messages]

    @property
    def last(self) -> str:
        return self.messages[-1].text


class AcceptAll:
    """A `MessageHandler` that takes every message: a platform under test
    needs no engine behind it."""

    async def accept(self, message: IncomingMessage) -> bool:
        return True
