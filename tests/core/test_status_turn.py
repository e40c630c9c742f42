"""/status after an answer the user has seen shows what it cost, not its hold.

An answer is delivered before its exchange commit settles its limit hold.
The outbox here keeps that window open: it records the answer (the user has
seen it), then returns only once /status has answered or has asked for the
conversation's turn. Real engine, real SQLite ledger; the provider is the
in-process `ScriptedProvider` (10 in, 5 out).
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.core.ledger import Limits
from chatbridge.core.limits import LimitGate, LimitPolicy, ProviderTerms
from chatbridge.core.models import Conversation, IncomingMessage
from chatbridge.core.ports.store import Lease
from chatbridge.core.scheduling.local import LocalScheduler
from chatbridge.stores.sqlite import SqliteStore
from tests.support.closing import Closing
from tests.support.fakes import ManualClock, RecordingOutbox, ScriptedProvider, latest_noon

ALICE = Conversation("telegram", "1", "1")


class HeldOutbox(RecordingOutbox):
    """Shows `answer` to the user, then holds the commit window until `release`."""

    def __init__(self, answer: str) -> None:
        super().__init__()
        self.answer = answer
        self.seen = asyncio.Event()
        self.release = asyncio.Event()

    async def _hold(self, text: str) -> None:
        if text == self.answer and not self.seen.is_set():
            self.seen.set()
            await self.release.wait()

    async def send(self, text: str) -> str:
        ref = await super().send(text)
        await self._hold(text)
        return ref

    async def edit(self, message: str, text: str) -> None:
        await super().edit(message, text)
        await self._hold(text)


class WatchedScheduler(LocalScheduler):
    """The real scheduler; `asked` is set once a command asks for a turn."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()

    def hold(self, conversation: str) -> AbstractAsyncContextManager[Lease]:
        self.asked.set()
        return super().hold(conversation)


def _left(status: str) -> int:
    (line,) = [x for x in status.splitlines() if x.startswith("left today: ")]
    return int(line.removeprefix("left today: ").removesuffix(" tokens"))


async def test_status_waits_for_the_commit_of_an_answer_already_seen(
    tmp_path: Path, closing: Closing
) -> None:
    store = SqliteStore(tmp_path / "bot.db", max_entries=20)
    await store.open()
    closing(store)
    clock = ManualClock(latest_noon())
    policy = LimitPolicy(
        default=Limits(tokens_per_day=100_000), terms={"main": ProviderTerms(max_tokens=500)}
    )
    scheduler = WatchedScheduler()
    engine = Engine(
        EngineSettings(language="en"),
        store=store,
        provider=ScriptedProvider("ok", name="main"),
        access=AccessPolicy(allow=("telegram:1",)),
        clock=clock,
        scheduler=scheduler,
        limits=LimitGate(policy, store=store, clock=clock, timezone=None),
    )
    held, status = HeldOutbox("ok"), RecordingOutbox()
    answering = asyncio.create_task(engine.handle(IncomingMessage(ALICE, "question"), held))
    await held.seen.wait()
    asking = asyncio.create_task(engine.handle(IncomingMessage(ALICE, "/status"), status))
    # Until /status answered (it did not wait) or asks for the turn, which the
    # answer's task holds until its commit is done.
    asked = asyncio.create_task(scheduler.asked.wait())
    await asyncio.wait({asking, asked}, return_when=asyncio.FIRST_COMPLETED)
    asked.cancel()
    held.release.set()
    await asyncio.gather(answering, asking)
    assert held.texts == ["ok"]
    assert _left(status.texts[0]) == 100_000 - 15, "/status showed the answer's hold"
