"""`KeyedLocks`: one conversation's turn within a process, FIFO, and no lock
left behind once nobody holds or waits (also after a cancelled wait)."""

from __future__ import annotations

import asyncio

import pytest

from chatbridge.core.scheduling import KeyedLocks


async def test_turns_are_taken_in_order_and_the_lock_goes_afterwards() -> None:
    locks, order = KeyedLocks(), []

    async def turn(name: str) -> None:
        async with locks.hold("c") as lease:
            assert lease.key == "c"
            order.append(name)
            await asyncio.sleep(0)

    await asyncio.gather(*(turn(name) for name in ("a", "b", "c")))
    assert order == ["a", "b", "c"]
    assert len(locks) == 0


async def test_a_cancelled_wait_leaves_no_user_behind() -> None:
    locks = KeyedLocks()
    async with locks.hold("c"):
        waiter = asyncio.create_task(_take(locks))
        await asyncio.sleep(0)  # one loop turn: the waiter runs up to its wait
        assert locks.users("c") == 2
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert locks.users("c") == 1
        assert await locks.is_held("c")
    assert len(locks) == 0
    assert not await locks.is_held("c")


async def test_an_error_inside_releases_the_turn() -> None:
    locks = KeyedLocks()
    with pytest.raises(ValueError, match="boom"):
        async with locks.hold("c"):
            raise ValueError("boom")
    assert len(locks) == 0
    async with locks.hold("c"):  # free again
        assert locks.users("c") == 1


async def _take(locks: KeyedLocks) -> None:
    async with locks.hold("c"):
        pass
