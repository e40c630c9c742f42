"""`chatbridge run`'s event loop ends within a bound: a task left running
that swallows every cancellation is logged and left behind, where
`asyncio.run` would wait for it forever. Each story runs in a Python
process of its own, as `chatbridge run` does (the loop is the process's)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROGRAM = """
import asyncio, logging
from chatbridge.core.app.bounded_run import run_bounded

logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")

async def swallows_cancellation():
    while True:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass

async def stops_when_cancelled():
    await asyncio.Event().wait()

async def main():
    asyncio.create_task({task}(), name="left running")
    await asyncio.sleep(0)
    return "main returned"

print(run_bounded(main(), stop_within=0.1))
"""


def run_program(task: str) -> subprocess.CompletedProcess[str]:
    source = textwrap.dedent(PROGRAM).format(task=task)
    # The timeout only guards against the hang this is about (a red test, not a stuck suite).
    return subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=30, check=False
    )


def test_a_task_that_swallows_cancellation_is_logged_and_left_behind_at_exit() -> None:
    try:
        done = run_program("swallows_cancellation")
    except subprocess.TimeoutExpired:
        pytest.fail("the process never ended: its end waited for the task")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "main returned\n"
    assert (
        "chatbridge.core.app.bounded_run: left running did not stop within 0.1s "
        "of being cancelled at exit; exiting without it"
    ) in done.stderr.splitlines()


def test_a_task_that_stops_when_cancelled_ends_quietly() -> None:
    done = run_program("stops_when_cancelled")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "main returned\n"
    assert done.stderr == ""
