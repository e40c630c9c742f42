"""`shielded`: a coroutine that never waits runs in the caller's task; one
that waits finishes even when its caller is cancelled (as `asyncio.shield`),
and results, errors and cancels reach it as if a task ran it whole."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from chatbridge.core.shielding import shielded


async def until(condition: Callable[[], bool]) -> None:
    """Give the loop turns until `condition` holds (no clock: nothing here
    waits for anything but other tasks, so 100 turns are plenty)."""
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("not reached in 100 loop turns")


async def test_a_coroutine_that_never_waits_runs_in_the_callers_task() -> None:
    caller = asyncio.current_task()
    ran_in: list[asyncio.Task[object] | None] = []

    async def commit() -> str:
        ran_in.append(asyncio.current_task())
        return "stored"

    assert await shielded(commit()) == "stored"
    assert ran_in == [caller]


async def test_an_error_of_a_coroutine_that_never_waits_reaches_the_caller() -> None:
    async def commit() -> None:
        raise LookupError("no such row")

    with pytest.raises(LookupError, match="no such row"):
        await shielded(commit())


async def test_a_waiting_coroutine_finishes_although_its_caller_is_cancelled() -> None:
    release, steps = asyncio.Event(), []

    async def commit() -> str:
        steps.append("begun")
        await release.wait()
        await asyncio.sleep(0)  # a bare yield to the loop, relayed too
        steps.append("committed")
        return "stored"

    caller = asyncio.create_task(shielded(commit()))
    await until(lambda: bool(steps))
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    release.set()
    await until(lambda: steps == ["begun", "committed"])


async def test_results_and_errors_of_what_it_waits_for_reach_the_coroutine() -> None:
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()

    async def commit() -> tuple[int, str]:
        value = await first
        try:
            await second
        except KeyError as exc:
            return value, str(exc)
        return value, "no error"

    caller = asyncio.create_task(shielded(commit()))
    await asyncio.sleep(0)
    first.set_result(7)
    await asyncio.sleep(0)
    second.set_exception(KeyError("gone"))
    assert await caller == (7, "'gone'")


async def test_a_cancel_of_the_task_it_goes_on_in_is_thrown_into_the_coroutine() -> None:
    seen: list[str] = []
    blocked = asyncio.get_running_loop().create_future()

    async def commit() -> None:
        try:
            await blocked
        except asyncio.CancelledError:
            seen.append("cancelled inside")
            raise

    caller = asyncio.create_task(shielded(commit()))
    await until(lambda: len(asyncio.all_tasks()) == 3)  # this test, the caller, `commit`'s rest
    inner = [t for t in asyncio.all_tasks() if t not in (caller, asyncio.current_task())]
    await asyncio.sleep(0)  # the inner task has taken its first step
    inner[0].cancel()  # as the loop does to every task at shutdown
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert seen == ["cancelled inside"]
    assert blocked.cancelled()


async def test_a_coroutine_whose_task_is_cancelled_before_it_starts_is_closed() -> None:
    seen: list[str] = []
    blocked = asyncio.get_running_loop().create_future()

    async def commit() -> None:
        try:
            await blocked
        finally:
            seen.append("closed")

    caller = asyncio.create_task(shielded(commit()))
    await until(lambda: len(asyncio.all_tasks()) == 3)
    inner = [t for t in asyncio.all_tasks() if t not in (caller, asyncio.current_task())]
    inner[0].cancel()  # before its first step: it never reaches `commit`
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert seen == ["closed"]
