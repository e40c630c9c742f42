"""`asyncio.run` with a bounded end, for `chatbridge run`.

When the main coroutine returns, `asyncio.run` cancels every task still
running and waits for all of them without a limit: one task that swallows
the cancellation (a library's reconnect loop, a cleanup stuck on a dead
socket that ignores being cancelled again) keeps the process from exiting
after a SIGTERM. Here the leftovers get `STOP_WITHIN` seconds; those that
did not stop are logged by name and the loop is closed without them.

The default executor is shut down as `asyncio.run` does (on Python 3.11
without a limit): bounding it would not bound the process, whose exit joins
the executor's threads anyway, and the only work chatbridge gives it (host
name lookups, the deferred SDK imports) ends by itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["STOP_WITHIN", "run_bounded"]

log = logging.getLogger(__name__)

T = TypeVar("T")

STOP_WITHIN = 5.0
"""s the tasks still running when the main coroutine ended get to stop."""


def run_bounded(main: Coroutine[Any, Any, T], *, stop_within: float = STOP_WITHIN) -> T:
    """`asyncio.run(main)` (the same Ctrl-C handling), except that the end
    waits at most `stop_within` s for the tasks left running."""
    runner = asyncio.Runner()
    try:
        return runner.run(main)
    finally:
        stuck = runner.run(_stop_leftovers(stop_within))
        if stuck:
            runner.get_loop().close()  # Runner.close would wait for them forever
            asyncio.set_event_loop(None)
        else:
            runner.close()


async def _stop_leftovers(within: float) -> set[asyncio.Task[Any]]:
    """Cancel every other task, wait at most `within` s; report what the
    stopped ones raised (as `asyncio.run` does) and log the rest."""
    me = asyncio.current_task()
    left = {task for task in asyncio.all_tasks() if task is not me}
    if not left:
        return set()
    for task in left:
        task.cancel()
    done, stuck = await asyncio.wait(left, timeout=within)
    loop = asyncio.get_running_loop()
    for task in done:
        if not task.cancelled() and (exc := task.exception()) is not None:
            loop.call_exception_handler(
                {"message": "unhandled exception at exit", "exception": exc, "task": task}
            )
    for task in sorted(stuck, key=lambda t: t.get_name()):
        log.warning(
            "%s did not stop within %gs of being cancelled at exit; exiting without it",
            task.get_name(),
            within,
        )
    return stuck
