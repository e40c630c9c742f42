"""Replicas sharing one Redis: in-process `Engine`s, each with its own client.

Every engine gets its own `RedisStore` client on one key prefix, Redis leases
with a short ttl, and the same per-chat outboxes (as a platform would rebuild
them from `reply_address`). The provider records which conversations stream
at the same time, so overlap within a conversation fails the test.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis

from chatbridge.core.access import AccessPolicy
from chatbridge.core.engine import Engine, EngineSettings
from chatbridge.core.models import (
    Conversation,
    Exchange,
    IncomingMessage,
    MemoryEntry,
    Session,
    Turn,
    Usage,
)
from chatbridge.core.ports import Prompt, StreamEvent, TextDelta, UsageReport
from chatbridge.core.ports.store import LeaseLost
from chatbridge.core.scheduling import SharedInboxScheduler
from chatbridge.core.texts import say
from chatbridge.stores.redis import RedisStore
from chatbridge.stores.redis._lease import RedisLeases, fence_key, lease_key
from tests.stores.helpers import purge_redis
from tests.support.fakes import RecordingOutbox
from tests.support.redis_server import redis_unavailable, redis_url

TTL = 1.0
DEADLINE = 30.0  # s; a hang detector, never a measure of speed


class TrackingProvider:
    """Answers "re <text>" in a few slow chunks; records overlap per conversation.

    The conversation is the text's part before "m" ("c3m1" -> "c3")."""

    name = label = "tracking"
    model = "tracking-model"

    def __init__(self, *, chunk_delay: float = 0.02, chunks: int = 3) -> None:
        self.active: Counter[str] = Counter()
        self.overlaps: list[str] = []
        self.streams: list[str] = []
        self.gate: asyncio.Event | None = None
        self._delay, self._chunks = chunk_delay, chunks

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        text = prompt.messages[-1].content
        conversation = text.partition("m")[0]
        self.active[conversation] += 1
        if self.active[conversation] > 1:
            self.overlaps.append(text)
        self.streams.append(text)
        try:
            if self.gate is not None:
                await self.gate.wait()
            parts = ["re ", text, ""]
            for part in parts[: self._chunks]:
                yield TextDelta(part)
                await asyncio.sleep(self._delay)
            yield UsageReport(Usage(1, 1))
        finally:
            self.active[conversation] -= 1

    async def aclose(self) -> None:
        return None


@dataclass
class Replica:
    engine: Engine
    store: RedisStore
    scheduler: SharedInboxScheduler

    @property
    def leases(self) -> RedisLeases:
        leases = self.scheduler._leases
        assert isinstance(leases, RedisLeases)
        return leases


@pytest.fixture
def prefix() -> Iterator[str]:
    reason = redis_unavailable()
    if reason:
        pytest.skip(reason)
    name = f"cbtest:replicas:{uuid.uuid4().hex[:12]}:"
    yield name
    purge_redis(name)


Chats = dict[str, RecordingOutbox]


@pytest.fixture
async def make(prefix: str) -> AsyncIterator[Callable[..., Awaitable[Replica]]]:
    made: list[Replica] = []

    async def build(
        provider: TrackingProvider, chats: Chats, *, cancel: bool = False, sweep: bool = True
    ) -> Replica:
        store = RedisStore(redis_url(), max_entries=100, prefix=prefix)
        await store.open()
        replication = store.replication(lease_ttl=TTL, poll=0.01)
        scheduler = SharedInboxScheduler(
            store, replication.leases, replication.notices, lease_ttl=TTL
        )
        settings = EngineSettings(language="en", inject_entries=0, cancel_on_new_message=cancel)
        engine = Engine(
            settings,
            store=store,
            provider=provider,
            access=AccessPolicy(allow=tuple(f"telegram:{c}" for c in range(1, 30))),
            scheduler=scheduler,
        )
        engine.attach(
            "telegram", lambda m: chats.setdefault(m.conversation.chat, RecordingOutbox())
        )
        if sweep:
            await engine.resume()
        replica = Replica(engine, store, scheduler)
        made.append(replica)
        return replica

    yield build
    for replica in made:
        await replica.engine.drain(1.0)
        await replica.store.aclose()


def _message(chat: str, text: str, event: str = "") -> IncomingMessage:
    conversation = Conversation("telegram", chat, chat)
    return IncomingMessage(
        conversation, text, event_id=event or uuid.uuid4().hex, reply_address=chat
    )


async def _until(check: Callable[[], Awaitable[bool]], within: float) -> float:
    """Seconds until `check()` held; fails after `within` s."""
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > within:
            raise AssertionError(f"not done within {within} s")
        await asyncio.sleep(0.02)
    return time.monotonic() - started


def _answered(
    chats: Chats, store: RedisStore, expect: dict[str, int]
) -> Callable[[], Awaitable[bool]]:
    """True once each chat shows its number of answers and nothing is pending."""

    async def check() -> bool:
        if any(len(chats.get(c, RecordingOutbox()).messages) < n for c, n in expect.items()):
            return False
        return not await store.inbox_pending()

    return check


async def test_one_conversation_round_robin_is_answered_in_order_once(make) -> None:
    provider, chats = TrackingProvider(), Chats()
    replicas = [await make(provider, chats) for _ in range(3)]
    texts = [f"c1m{i}" for i in range(9)]
    for i, text in enumerate(texts):
        assert await replicas[i % 3].engine.accept(_message("1", text))
    await _until(_answered(chats, replicas[0].store, {"1": 9}), DEADLINE)
    assert chats["1"].texts == [f"re {t}" for t in texts]
    assert provider.streams == texts, "each message streamed once, in order"
    assert provider.overlaps == []
    ring = await replicas[0].store.ring("telegram:1", since=0.0)
    assert [e.user_message for e in ring] == texts


async def test_the_same_event_on_two_replicas_is_answered_once(make) -> None:
    provider, chats = TrackingProvider(), Chats()
    a, b = await make(provider, chats), await make(provider, chats)
    message = _message("2", "c2m1", event="42")
    added = await asyncio.gather(a.engine.accept(message), b.engine.accept(message))
    assert sorted(added) == [False, True]
    # Nothing pending (checked by _answered): no answer can follow any more.
    await _until(_answered(chats, a.store, {"2": 1}), DEADLINE)
    assert chats["2"].texts == ["re c2m1"]
    assert provider.streams == ["c2m1"]


async def test_many_conversations_spread_randomly_are_all_answered_once(make) -> None:
    provider, chats = TrackingProvider(chunk_delay=0.005), Chats()
    replicas = [await make(provider, chats) for _ in range(3)]
    rng = random.Random(7)
    sent: dict[str, list[str]] = {str(c): [] for c in range(1, 21)}
    for n in range(4):
        for chat in rng.sample(sorted(sent), len(sent)):
            text = f"c{chat}m{n}"
            sent[chat].append(text)
            assert await rng.choice(replicas).engine.accept(_message(chat, text))
    await _until(_answered(chats, replicas[0].store, dict.fromkeys(sent, 4)), DEADLINE)
    assert provider.overlaps == []
    assert Counter(provider.streams) == Counter(t for ts in sent.values() for t in ts)
    for chat, texts in sent.items():
        assert chats[chat].texts == [f"re {t}" for t in texts]
        ring = await replicas[1].store.ring(f"telegram:{chat}", since=0.0)
        assert [e.user_message for e in ring] == texts


async def test_a_crashed_holder_blocks_its_conversation_for_at_most_the_ttl(
    make, prefix: str
) -> None:
    provider, chats = TrackingProvider(), Chats()
    replica = await make(provider, chats)
    client = aioredis.from_url(redis_url())
    try:  # a holder that took the lease, then died: never extended, never released
        lease = lease_key(prefix, "telegram:3::3")
        assert await client.set(lease, "dead", nx=True, px=int(TTL * 1000))
    finally:
        await client.aclose()
    assert await replica.engine.accept(_message("3", "c3m1"))
    # Blocked while the dead lease lives; taken over once it expires (the
    # deadline only catches a hang: a busy machine may take longer than the ttl).
    waited = await _until(_answered(chats, replica.store, {"3": 1}), DEADLINE)
    assert waited >= TTL * 0.5
    print(f"answered {waited:.2f} s after a dead holder took the lease (ttl {TTL} s)")
    assert chats["3"].texts == ["re c3m1"]


async def test_what_a_dead_replica_received_is_answered_by_another(make) -> None:
    chats = Chats()
    stuck = TrackingProvider()
    stuck.gate = asyncio.Event()  # never set: the dead replica hangs mid-answer
    dead = await make(stuck, chats, sweep=False)

    async def no_release(*_: object) -> None:
        return None

    async def no_keep(*_: object) -> None:
        return None

    dead.leases._release = no_release
    dead.leases._keep = no_keep
    assert await dead.engine.accept(_message("4", "c4m1"))
    await _until(lambda: _true(bool(stuck.streams)), DEADLINE)
    for task in list(dead.scheduler._tasks):  # it dies: the lease stays until its ttl
        task.cancel()
    provider = TrackingProvider()
    alive = await make(provider, chats)
    assert await alive.engine.accept(_message("4", "c4m2"))
    waited = await _until(_answered(chats, alive.store, {"4": 2}), DEADLINE)
    print(f"taken over and answered {waited:.2f} s later (ttl {TTL} s)")
    assert chats["4"].texts == ["re c4m1", "re c4m2"]
    assert provider.streams == ["c4m1", "c4m2"]


async def _true(value: bool) -> bool:
    return value


async def test_a_stale_holders_commit_is_refused_and_writes_nothing(prefix: str) -> None:
    store = RedisStore(redis_url(), max_entries=10, prefix=prefix)
    await store.open()
    try:
        leases = store.replication(lease_ttl=TTL).leases
        conversation = "telegram:5::5"
        session = Session(conversation, "telegram:5", 1000.0, 1000.0, [Turn("user", "a")])
        entry = MemoryEntry(1000.0, "a", "b", conversation, user="telegram:5")
        async with leases.hold(conversation) as lease:
            assert lease.fence > 0
            client = aioredis.from_url(redis_url())
            try:  # another replica took the lease over meanwhile
                await client.incr(fence_key(prefix, conversation))
            finally:
                await client.aclose()
            stale = Exchange(
                "telegram:5", session, entry, Usage(1, 1), "2025-01-01",
                added_turns=1, fence=lease.fence, fence_key=conversation,
            )  # fmt: skip
            with pytest.raises(LeaseLost, match="another replica"):
                await store.commit_exchange(stale)
        assert await store.load_session(conversation) is None
        assert await store.ring("telegram:5", since=0.0) == []
        async with leases.hold(conversation) as newer:
            fresh = Exchange(
                "telegram:5", session, entry, Usage(1, 1), "2025-01-01",
                added_turns=1, fence=newer.fence, fence_key=conversation,
            )  # fmt: skip
            await store.commit_exchange(fresh)
        assert await store.load_session(conversation) is not None
    finally:
        await store.aclose()


async def test_an_answer_whose_lease_was_lost_is_finished_by_the_next_holder(
    make, prefix: str
) -> None:
    provider, chats = TrackingProvider(), Chats()
    replica = await make(provider, chats, sweep=False)
    provider.gate = asyncio.Event()
    assert await replica.engine.accept(_message("6", "c6m1", event="e6"))
    await _until(lambda: _true(bool(provider.streams)), DEADLINE)
    client = aioredis.from_url(redis_url())
    try:  # a takeover while the answer streams
        await client.incr(fence_key(prefix, "telegram:6::6"))
    finally:
        await client.aclose()
    provider.gate.set()
    # The stale holder's commit is refused; the next holder of the lease (here
    # the same replica, taking it anew) finishes the recorded answer by editing.
    await _until(_answered(chats, replica.store, {"6": 1}), DEADLINE)
    assert chats["6"].texts == ["re c6m1"]
    assert say("en", "not_stored") not in chats["6"].texts
    assert provider.streams == ["c6m1"], "the recorded answer is not asked for again"
    session = await replica.store.load_session("telegram:6::6")
    assert session is not None
    assert [t.content for t in session.turns] == ["c6m1", "re c6m1"]


async def test_cancel_mode_cancels_the_reply_on_another_replica(make) -> None:
    provider, chats = TrackingProvider(chunk_delay=0.3), Chats()
    a, b = await make(provider, chats, cancel=True), await make(provider, chats, cancel=True)
    assert await a.engine.accept(_message("7", "c7m1"))
    await _until(lambda: _true(bool(provider.streams)), DEADLINE)
    assert await b.engine.accept(_message("7", "c7m2"))
    await _until(_answered(chats, a.store, {}), DEADLINE)
    await _until(lambda: _true(any(m.text == "re c7m2" for m in chats["7"].messages)), DEADLINE)
    ring = await a.store.ring("telegram:7", since=0.0)
    assert [e.user_message for e in ring] == ["c7m2"]


class BuggyProvider(TrackingProvider):
    """A provider with a bug: it raises something none of our error types cover."""

    async def stream(self, prompt: Prompt) -> AsyncIterator[StreamEvent]:
        self.streams.append(prompt.messages[-1].content)
        raise RuntimeError("a bug in the provider")
        yield TextDelta("")  # an async generator, like a real stream


async def test_an_unexpected_error_is_told_once_not_on_every_sweep(make) -> None:
    provider, chats = BuggyProvider(), Chats()
    a, b = await make(provider, chats), await make(provider, chats)
    assert await a.engine.accept(_message("8", "c8m1"))
    # Closed as failed (nothing pending) after one sentence, on one replica.
    await _until(_answered(chats, a.store, {"8": 1}), DEADLINE)
    # Until the entry is older than the ttl: were it still pending, a sweep would take it.
    started = time.monotonic()
    await _until(lambda: _true(time.monotonic() - started > 1.5 * TTL), DEADLINE)
    assert await a.scheduler.sweep() == 0
    assert await b.scheduler.sweep() == 0
    assert chats["8"].texts == [say("en", "internal_error")]
    assert provider.streams == ["c8m1"]
