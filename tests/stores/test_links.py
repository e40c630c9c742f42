"""Links between platform IDs on every backend: single-use codes, lockout,
joining and splitting people, and persistence across a reopen."""

from __future__ import annotations

from pathlib import Path

from chatbridge.core.links import LOCK_AFTER, LOCK_FOR, code_hash
from tests.stores.helpers import AnyStore, opened

NOW = 1_800_000_000.0
TG, DC, SL = "telegram:1", "discord:2", "slack:U3"


async def test_a_code_is_single_use_and_expires(store: AnyStore) -> None:
    await store.link_offer(TG, code_hash("ABC123"), expires_at=NOW + 600)
    assert await store.link_take(code_hash("abc123"), now=NOW) == TG
    assert await store.link_take(code_hash("ABC123"), now=NOW) is None
    await store.link_offer(TG, code_hash("LATE42"), expires_at=NOW + 600)
    assert await store.link_take(code_hash("LATE42"), now=NOW + 601) is None


async def test_a_new_code_replaces_the_old_one(store: AnyStore) -> None:
    await store.link_offer(TG, code_hash("FIRST1"), expires_at=NOW + 600)
    await store.link_offer(TG, code_hash("SECOND"), expires_at=NOW + 600)
    assert await store.link_take(code_hash("FIRST1"), now=NOW) is None
    assert await store.link_take(code_hash("SECOND"), now=NOW) == TG


async def test_five_wrong_codes_lock_for_an_hour(store: AnyStore) -> None:
    results = [await store.link_attempt(DC, now=NOW, failed=True) for _ in range(LOCK_AFTER)]
    assert results[:-1] == [None] * (LOCK_AFTER - 1)
    assert results[-1] == NOW + LOCK_FOR
    assert await store.link_attempt(DC, now=NOW + LOCK_FOR - 1, failed=False) == NOW + LOCK_FOR
    assert await store.link_attempt(DC, now=NOW + LOCK_FOR + 1, failed=False) is None
    assert await store.link_attempt(TG, now=NOW, failed=False) is None


async def test_join_three_then_split(store: AnyStore) -> None:
    assert await store.link_group(TG) == ()
    assert await store.link_join(TG, DC) == TG
    assert await store.link_join(DC, SL) == TG  # joins the person DC belongs to
    assert await store.link_group(SL) == (TG, DC, SL, TG)  # key, then members sorted
    assert await store.link_split(TG)  # the key's own ID leaves: the next carries it
    assert await store.link_group(TG) == ()
    assert await store.link_group(DC) == (DC, DC, SL)
    assert await store.link_split(SL)
    assert await store.link_group(DC) == ()  # a person of one is no link
    assert not await store.link_split(SL)


async def test_links_survive_a_reopen(backend: str, path: Path, store: AnyStore) -> None:
    await store.link_join(TG, DC)
    await store.aclose()
    again = await opened(backend, path)
    try:
        assert await again.link_group(DC) == (TG, DC, TG)
    finally:
        await again.aclose()
