"""Redis specifics: key layout, expiry, atomic commits, forget, errors.

The shared contract (test_contract.py) runs against redis too. Everything here
uses the run's own real server (tests.support.redis_server) with a fresh key prefix per test, and
deletes that prefix's keys afterwards; without a server these tests skip
(except the ones that need none).
"""

from __future__ import annotations

import asyncio
import traceback
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from chatbridge.core.models import Session, Turn, Usage
from chatbridge.core.ports.store import StoreCorrupt, StoreError, StoreSettings
from chatbridge.stores import open_store
from chatbridge.stores._codec import user_hash
from chatbridge.stores.redis import RedisStore
from tests.stores.helpers import exchange, purge_redis, redis_keys
from tests.support.redis_server import redis_unavailable, redis_url

USER = "telegram:579304651"
KEY = "telegram:579304651::579304651"
DAY = "2025-04-05"
SECRET = "ZEBRA-7c1f-parcel-to-Karlstraße-12"
KEPT = "OTTER-kept-for-someone-else"


@pytest.fixture
def prefix() -> Iterator[str]:
    if reason := redis_unavailable():
        pytest.skip(reason)
    p = f"cbtest:{uuid.uuid4().hex}:"
    yield p
    purge_redis(p)


@pytest.fixture
async def store(prefix: str) -> AsyncIterator[RedisStore]:
    s = RedisStore(redis_url(), max_entries=3, prefix=prefix)
    await s.open()
    yield s
    await s.aclose()


@pytest.fixture
async def raw() -> AsyncIterator[aioredis.Redis]:
    """A plain client, to look at and tamper with keys behind the store's back."""
    client = aioredis.from_url(redis_url(), decode_responses=True)
    yield client
    await client.aclose()


async def test_layout_types_and_expiry(prefix: str, raw: aioredis.Redis) -> None:
    s = RedisStore(redis_url(), max_entries=3, prefix=prefix, ttl=600)
    await s.open()
    await s.commit_exchange(exchange("hi", user=USER, key=KEY, day=DAY))
    await s.aclose()

    keys = redis_keys(prefix)
    assert {k.removeprefix(prefix): type(v).__name__ for k, v in keys.items()} == {
        f"ring:{USER}": "list",
        f"session:{KEY}": "dict",
        f"turns:{KEY}": "list",
        f"user-sessions:{USER}": "set",
        f"usage:{DAY}:{USER}": "dict",
        f"user-days:{USER}": "set",
    }
    assert keys[f"{prefix}user-sessions:{USER}"] == {KEY}
    assert keys[f"{prefix}user-days:{USER}"] == {DAY}
    assert keys[f"{prefix}usage:{DAY}:{USER}"] == {"input_tokens": "3", "output_tokens": "5"}
    for name in ("ring", "session", "turns", "user-sessions"):
        key = f"{prefix}{name}:{KEY if name in ('session', 'turns') else USER}"
        assert 590_000 < await raw.pttl(key) <= 600_000, key
    eight_days = 8 * 24 * 3600 * 1000
    assert eight_days - 10_000 < await raw.pttl(f"{prefix}usage:{DAY}:{USER}") <= eight_days
    assert await raw.pttl(f"{prefix}user-days:{USER}") > eight_days - 10_000  # outlives usage


async def test_turns_are_appended_then_trimmed(store: RedisStore, raw: aioredis.Redis) -> None:
    t = [Turn("user" if i % 2 == 0 else "assistant", f"t{i}") for i in range(8)]
    ex = exchange("x", user=USER, key=KEY)
    await store.commit_exchange(replace(ex, session=replace(ex.session, turns=t[:2])))
    await store.commit_exchange(replace(ex, session=replace(ex.session, turns=t[:4])))
    assert (await store.load_session(KEY)) == replace(ex.session, turns=t[:4])
    # The engine dropped the oldest turns: the store keeps only the newest len(turns).
    await store.commit_exchange(replace(ex, session=replace(ex.session, turns=t[2:6])))
    assert await raw.llen(f"{store._db.prefix}turns:{KEY}") == 4
    assert (await store.load_session(KEY)) == replace(ex.session, turns=t[2:6])
    # added_turns=0 appends nothing; an empty session drops the turns list.
    await store.commit_exchange(
        replace(ex, session=replace(ex.session, turns=t[2:6]), added_turns=0)
    )
    assert (await store.load_session(KEY)) == replace(ex.session, turns=t[2:6])
    await store.commit_exchange(replace(ex, session=replace(ex.session, turns=[]), added_turns=0))
    assert (await store.load_session(KEY)) == replace(ex.session, turns=[])
    assert not await raw.exists(f"{store._db.prefix}turns:{KEY}")


async def test_forget_leaves_no_key_or_text_of_the_user(store: RedisStore, prefix: str) -> None:
    for i in range(5):  # more than max_entries, and the session rewritten each time
        await store.commit_exchange(exchange(f"{SECRET} #{i}", ts=float(i), user="telegram:1"))
        await store.commit_exchange(exchange(f"{KEPT} #{i}", ts=float(i), user="discord:2"))
    await store.commit_exchange(exchange(SECRET, user="telegram:1", day="2025-04-06"))
    side = Session("side", "telegram:1", 1.0, 2.0, [Turn("user", SECRET)] * 3)
    await store.save_session(side, key="side")
    before = repr(redis_keys(prefix))
    assert SECRET in before
    assert "telegram:1" in before

    await store.forget("telegram:1")

    left = redis_keys(prefix)
    assert not [k for k in left if "telegram:1" in k]
    assert SECRET not in repr(left)
    assert "ZEBRA" not in repr(left)
    assert "telegram:1" not in repr(left)  # nor who they were
    assert KEPT in repr(left)
    assert await store.ring("telegram:1", since=-1) == []
    assert await store.load_session("side") is None
    assert await store.usage("telegram:1", day="2025-04-06") == Usage()
    assert [e.user_message for e in await store.ring("discord:2", since=-1)] == [
        f"{KEPT} #2", f"{KEPT} #3", f"{KEPT} #4",
    ]  # fmt: skip
    assert await store.usage("discord:2", day="2025-04-05") == Usage(15, 25)


async def test_forget_spares_a_session_that_changed_owner(store: RedisStore) -> None:
    await store.save_session(Session("shared", "telegram:1", 1.0, 2.0), key="shared")
    await store.save_session(Session("shared", "discord:2", 3.0, 4.0), key="shared")
    await store.forget("telegram:1")  # "shared" is still listed under telegram:1
    assert await store.load_session("shared") == Session("shared", "discord:2", 3.0, 4.0)


async def test_users_and_days_with_colons_never_collide(store: RedisStore) -> None:
    await store.commit_exchange(exchange("ab", user="a:b", day="2025-04-05", tokens=(1, 1)))
    await store.commit_exchange(exchange("a", user="a", day="b:2025-04-05", tokens=(7, 7)))
    assert await store.usage("a:b", day="2025-04-05") == Usage(1, 1)
    assert await store.usage("a", day="b:2025-04-05") == Usage(7, 7)
    await store.forget("a")
    assert [e.user_message for e in await store.ring("a:b", since=0)] == ["ab"]
    assert await store.usage("a:b", day="2025-04-05") == Usage(1, 1)
    assert await store.load_session("a:b:chat") is not None


FOREIGN = {  # which of the commit's keys is somebody else's, and as what
    "ring": ("ring:telegram:1", "string"),
    "session": ("session:telegram:1:chat", "list"),
    "turns": ("turns:telegram:1:chat", "string"),
    "user-sessions": ("user-sessions:telegram:1", "list"),
    "usage": (f"usage:{DAY}:telegram:1", "string"),
    "user-days": ("user-days:telegram:1", "hash"),
    "usage-counter": (f"usage:{DAY}:telegram:1", "bad-counter"),
    "forgotten": (f"forgotten:{user_hash('telegram:1')}", "hash"),
}


async def _plant(raw: aioredis.Redis, key: str, kind: str) -> Any:
    if kind == "string":
        await raw.set(key, "someone else's")
    elif kind == "list":
        await raw.rpush(key, "someone else's")
    elif kind == "hash":
        await raw.hset(key, "someone", "else")
    else:
        await raw.hset(key, mapping={"input_tokens": "lots", "output_tokens": "0"})
    return await raw.dump(key)


@pytest.mark.parametrize("case", sorted(FOREIGN))
async def test_foreign_key_refuses_the_whole_commit(
    case: str, store: RedisStore, prefix: str, raw: aioredis.Redis
) -> None:
    key = prefix + FOREIGN[case][0]
    planted = await _plant(raw, key, FOREIGN[case][1])

    with pytest.raises(StoreCorrupt, match="left untouched") as err:
        await store.commit_exchange(exchange("hello", user="telegram:1", day=DAY))

    assert repr(key) in str(err.value)
    assert set(redis_keys(prefix)) == {key}  # nothing else was written
    assert await raw.dump(key) == planted  # and the foreign value is byte-identical


async def test_foreign_keys_are_corrupt_on_read_and_forget(
    store: RedisStore, prefix: str, raw: aioredis.Redis
) -> None:
    await raw.set(f"{prefix}ring:u", "x")
    await raw.set(f"{prefix}session:k", "x")
    await raw.rpush(f"{prefix}usage:{DAY}:u", "x")
    await raw.set(f"{prefix}user-sessions:u", "x")
    cases: list[tuple[Callable[[], Awaitable[object]], str]] = [
        (lambda: store.ring("u", since=0), "ring:u"),
        (lambda: store.load_session("k"), "session:k"),
        (lambda: store.usage("u", day=DAY), f"usage:{DAY}:u"),
        (lambda: store.forget("u"), "user-sessions:u"),
        (lambda: store.save_session(Session("k", "w", 1.0, 2.0), key="k"), "session:k"),
    ]
    for call, key in cases:
        with pytest.raises(StoreCorrupt) as err:
            await call()
        assert repr(prefix + key) in str(err.value), key
    assert await raw.get(f"{prefix}ring:u") == "x"


async def test_damaged_values_in_our_keys_cost_only_themselves(
    store: RedisStore, prefix: str, raw: aioredis.Redis
) -> None:
    """Issue 17.3: keys of our type whose values cannot be read (they were StoreCorrupt)."""
    await raw.rpush(f"{prefix}ring:v", "not json")
    await raw.hset(f"{prefix}session:s", mapping={"user": "u", "started_at": "soon"})
    await raw.hset(
        f"{prefix}session:t", mapping={"user": "u", "started_at": "1", "last_active": "2"}
    )
    await raw.rpush(f"{prefix}turns:t", '{"role": "user"}', '{"role": "user", "content": "ok"}')
    assert await store.ring("v", since=0) == []
    assert await store.load_session("s") is None
    session = await store.load_session("t")
    assert session is not None
    assert session.turns == [Turn("user", "ok")]


async def test_concurrent_commits_each_land_once_and_whole(prefix: str) -> None:
    a, b = (RedisStore(redis_url(), max_entries=5, prefix=prefix) for _ in range(2))
    await a.open()
    await b.open()
    try:
        exchanges = [exchange(f"m{i}", ts=float(i), tokens=(1, 10)) for i in range(30)]
        await asyncio.gather(
            *((a if i % 2 else b).commit_exchange(ex) for i, ex in enumerate(exchanges))
        )
        assert await a.usage("telegram:1", day="2025-04-05") == Usage(30, 300)
        ring = await b.ring("telegram:1", since=-1)
        assert len(ring) == 5
        assert len({e.user_message for e in ring}) == 5
        session = await a.load_session("telegram:1:chat")
        assert session is not None
        assert len(session.turns) == 2
    finally:
        await a.aclose()
        await b.aclose()


async def test_forget_retries_when_the_user_commits_meanwhile(
    store: RedisStore, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.commit_exchange(exchange(SECRET, user="telegram:1", key="telegram:1:a"))
    other = RedisStore(redis_url(), max_entries=3, prefix=prefix)
    await other.open()
    original = store._db.read
    calls = 0

    async def interfering(*args: Any, **kwargs: Any) -> list[Any]:
        nonlocal calls
        calls += 1
        if calls == 1:  # forget has read the user's sets; another process commits now
            late = exchange(SECRET, user="telegram:1", key="telegram:1:b", day="2025-04-06")
            await other.commit_exchange(late)
        return await original(*args, **kwargs)

    monkeypatch.setattr(store._db, "read", interfering)
    await store.forget("telegram:1")
    await other.aclose()

    assert calls > 2  # the first EXEC was aborted by WATCH and forget ran again
    # The late session and day went too; only the tombstone (by hash) is left.
    assert list(redis_keys(prefix)) == [f"{prefix}forgotten:{user_hash('telegram:1')}"]


async def test_tombstone_is_hashed_and_expires_no_sooner_than_usage(
    prefix: str, raw: aioredis.Redis
) -> None:
    s = RedisStore(redis_url(), max_entries=3, prefix=prefix, ttl=600)
    await s.open()
    await s.commit_exchange(exchange("hi", user=USER, key=KEY, day=DAY))
    await s.forget(USER)
    await s.aclose()

    tomb = f"{prefix}forgotten:{user_hash(USER)}"
    assert list(redis_keys(prefix)) == [tomb]
    eight_days = 8 * 24 * 3600 * 1000
    assert eight_days - 10_000 < await raw.pttl(tomb) <= eight_days


async def test_a_forget_between_check_and_exec_still_wins(
    store: RedisStore, prefix: str, raw: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit's type check saw no tombstone; forget lands before its EXEC."""
    first = exchange(SECRET, user="telegram:1", key="telegram:1:a")
    await store.commit_exchange(first)
    await store.commit_exchange(exchange(KEPT, user="discord:2"))
    admin = RedisStore(redis_url(), max_entries=3, prefix=prefix)
    await admin.open()
    original = store._db.check_types

    async def forget_meanwhile(*args: Any, **kwargs: Any) -> float | None:
        at = await original(*args, **kwargs)
        await admin.forget("telegram:1")
        return at

    monkeypatch.setattr(store._db, "check_types", forget_meanwhile)
    late = replace(first, session=replace(first.session, last_active=2000.0))
    await store.commit_exchange(late)
    await admin.aclose()

    tomb = f"{prefix}forgotten:{user_hash('telegram:1')}"
    stamped = await raw.get(tomb)
    left = redis_keys(prefix)
    assert SECRET not in repr(left)
    assert "telegram:1" not in repr(left)
    assert KEPT in repr(left)
    assert await raw.get(tomb) == stamped  # the clean-up kept the forget's time
    monkeypatch.undo()
    assert await store.ring("telegram:1", since=-1) == []
    assert await store.load_session("telegram:1:a") is None
    assert await store.usage("telegram:1", day=DAY) == Usage()


async def test_forget_gives_up_whole_when_the_user_never_holds_still(
    store: RedisStore, prefix: str, raw: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.commit_exchange(exchange("kept", user="telegram:1"))
    before = redis_keys(prefix)
    original = store._db.read

    async def always_interfering(*args: Any, **kwargs: Any) -> list[Any]:
        await raw.pexpire(f"{prefix}user-days:telegram:1", 10**9)
        return await original(*args, **kwargs)

    monkeypatch.setattr(store._db, "read", always_interfering)
    with pytest.raises(StoreError, match="forget gave up after 20 attempts"):
        await store.forget("telegram:1")
    assert redis_keys(prefix) == before  # nothing half-deleted


async def test_unreachable_server_names_the_url() -> None:
    s = RedisStore("redis://127.0.0.1:1/0", max_entries=3)
    with pytest.raises(StoreError) as err:
        await s.open()
    await s.aclose()  # never opened: still fine
    assert str(err.value) == (
        "redis://127.0.0.1:1/0 is not reachable (Connection refused); is Redis running?"
    )


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:hunter2@127.0.0.1:1/0", "redis://:***@127.0.0.1:1/0"),
        ("redis://bob:hunter2@127.0.0.1:1/0", "redis://bob:***@127.0.0.1:1/0"),
        ("redis://127.0.0.1:1/0?password=hunter2&db=0", "redis://127.0.0.1:1/0?password=***&db=0"),
    ],
)
async def test_password_never_appears(url: str, shown: str) -> None:
    s = RedisStore(url, max_entries=3)
    with pytest.raises(StoreError) as err:
        await s.open()
    assert str(err.value).startswith(f"{shown} is not reachable (Connection refused)")
    assert "hunter2" not in "".join(traceback.format_exception(err.value))
    with pytest.raises(StoreError, match=r"not open") as closed:
        await s.ring("u", since=0)
    assert "hunter2" not in str(closed.value)


async def test_wrong_password_is_a_masked_store_error() -> None:
    if reason := redis_unavailable():
        pytest.skip(reason)
    address = redis_url().removeprefix("redis://")
    with pytest.raises(StoreError, match="refused the login") as err:
        await RedisStore(f"redis://nobody:hunter2@{address}", max_entries=3).open()
    assert str(err.value).startswith(f"redis://nobody:***@{address} refused the login")
    assert "hunter2" not in str(err.value)


@pytest.mark.parametrize("url", ["http://127.0.0.1:6379", "redis://127.0.0.1:port/0"])
async def test_unusable_url(url: str) -> None:
    with pytest.raises(StoreError, match="is not a usable Redis URL"):
        await RedisStore(url, max_entries=3).open()


def test_ttl_must_be_positive() -> None:
    with pytest.raises(ValueError, match="ttl"):
        RedisStore(redis_url(), max_entries=3, ttl=0)


async def test_open_store_builds_the_redis_backend() -> None:
    if reason := redis_unavailable():
        pytest.skip(reason)
    s = await open_store(
        StoreSettings(backend="redis", path=Path("unused"), url=redis_url(), max_entries=3)
    )
    try:
        assert isinstance(s, RedisStore)
        assert await s.ring(f"cbtest-nobody-{uuid.uuid4().hex}", since=0) == []  # reads only
    finally:
        await s.aclose()
