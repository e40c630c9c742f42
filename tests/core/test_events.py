"""Redelivery suppression shared between replicas through a real Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.events import RedisEvents
from core.store import StoreError
from tests.core.store.helpers import REDIS_URL, purge_redis, redis_unavailable
from tests.support.testbot import make_testbot


@pytest.fixture
def prefix() -> Iterator[str]:
    reason = redis_unavailable()
    if reason:
        pytest.skip(reason)
    name = f"cbtest:{uuid.uuid4().hex}:"
    yield name
    purge_redis(name)


async def test_two_replicas_answer_a_redelivered_event_once(tmp_path: Path, prefix: str) -> None:
    replica_a = await make_testbot(tmp_path / "a")
    replica_b = await make_testbot(tmp_path / "b")
    events_a, events_b = (
        RedisEvents(REDIS_URL, prefix=prefix),
        RedisEvents(REDIS_URL, prefix=prefix),
    )
    replica_a.engine.events, replica_b.engine.events = events_a, events_b
    first = await replica_a.say("Hallo", event_id="telegram:77")
    second = await replica_b.say("Hallo", event_id="telegram:77")
    third = await replica_b.say("Nochmal", event_id="telegram:78")
    assert first == "echo: Hallo"
    assert second == "", "the retry on the other replica was answered again"
    assert third == "echo: Nochmal"
    for bot, events in ((replica_a, events_a), (replica_b, events_b)):
        await events.aclose()
        await bot.engine.store.aclose()


async def test_an_unreachable_redis_is_a_store_error_naming_it_masked() -> None:
    events = RedisEvents("redis://:hunter2secret@127.0.0.1:1/0")
    with pytest.raises(StoreError) as info:
        await events.first_time("telegram:1", 0.0)
    assert "127.0.0.1:1" in str(info.value)
    assert "hunter2secret" not in str(info.value)
    await events.aclose()
