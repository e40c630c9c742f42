"""What both schedulers share: the tasks, the reply in flight per conversation,
cancelling it, running a command beside the answers, and draining."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from chatbridge.core.models import InboxEntry
from chatbridge.core.outcome import Outcome
from chatbridge.core.ports.scheduling import ConversationWork

__all__ = ["SchedulerBase"]

log = logging.getLogger(__name__)

STOP_WITHIN = 2.0
"""s a cancelled task gets to end while draining: a background task (the
inbox sweep, the cancel-notice listener) as soon as the drain starts, a
reply when the grace is over. One that swallows the cancellation or hangs in
its cleanup (a Redis pubsub closing on a dead socket) is logged by name and
left behind, so shutdown goes on: a drain takes at most about
`2 * STOP_WITHIN + grace`."""


class SchedulerBase:
    """Tasks, replies in flight and draining; subclasses decide whose turn it is."""

    reads_inbox = False

    def __init__(self) -> None:
        self._work: ConversationWork | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._inflight: dict[str, tuple[asyncio.Task[None], InboxEntry]] = {}
        self._known: set[str] = set()  # keys of the commands running here
        self._draining = False

    def bind(self, work: ConversationWork) -> None:
        self._work = work

    @property
    def work(self) -> ConversationWork:
        if self._work is None:
            raise RuntimeError("the scheduler is not bound to an engine")
        return self._work

    def idle(self) -> bool:
        return all(task.done() for task in self._tasks)

    def cancel(self, conversation: str) -> None:
        running = self._inflight.get(conversation)
        if running is not None and not running[0].done():
            running[0].cancel()

    def _supersede(self, entry: InboxEntry) -> None:
        """Cancel mode: a newly accepted `entry` stops its conversation's reply
        in flight, unless the platform's order says that one is newer."""
        running = self._inflight.get(entry.message.conversation.key)
        if running is None:
            return
        old, new = running[1].message.order, entry.message.order
        if not (old and new and new < old):
            running[0].cancel()

    def _supersede_at(self, conversation: str, received_at: float) -> None:
        """Another replica accepted a message for `conversation` at `received_at`."""
        running = self._inflight.get(conversation)
        if running is not None and running[1].received_at <= received_at:
            running[0].cancel()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        name = getattr(work, "__qualname__", "reply")
        task = asyncio.create_task(work, name=f"scheduler: {name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def run_beside(self, work: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        """Run `work` beside the answers until `drain` cancels it (at its start,
        waiting at most `STOP_WITHIN`); `name` is what the log calls it."""
        task = asyncio.create_task(work, name=f"scheduler: {name}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def _run_command(self, entry: InboxEntry) -> bool:
        """Run a command at once, beside its conversation's answers (/new must
        be able to cancel the reply in flight and wait for the turn)."""
        if entry.key in self._known:
            return False
        self._known.add(entry.key)
        self._spawn(self._command(entry))
        return True

    async def _command(self, entry: InboxEntry) -> None:
        try:
            await self.work.run(entry, 0)
        except asyncio.CancelledError:
            await self.work.close(entry, Outcome.LEFT)
            raise
        finally:
            self._known.discard(entry.key)

    async def _run(self, conversation: str, entry: InboxEntry, fence: int) -> None:
        """Answer `entry` in its own task, so `cancel` stops just that reply.

        A reply cancelled by `cancel` (a newer message in cancel mode, /new) is
        closed as CANCELLED; one cut by `drain` is LEFT for the restart."""
        work = self.work
        task = asyncio.create_task(work.run(entry, fence))
        self._inflight[conversation] = (task, entry)
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._draining or (current is not None and current.cancelling()):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                await work.close(entry, Outcome.LEFT)
                raise
            log.info("reply in %s cancelled", conversation)  # superseded or /new
            await work.close(entry, Outcome.CANCELLED)
        finally:
            if self._inflight.get(conversation, (None,))[0] is task:
                del self._inflight[conversation]

    async def drain(self, grace: float) -> None:
        """Stop the background tasks, let the answers run for up to `grace` s,
        then cut the rest (their entries stay LEFT for the restart). Bounded:
        a task that does not stop when cancelled is logged and left behind."""
        self._draining = True
        await _stop(self._background)
        tasks = [t for t in self._tasks if not t.done()]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace)
        await _stop(pending)


async def _stop(tasks: set[asyncio.Task[None]]) -> None:
    """Cancel `tasks` and wait at most `STOP_WITHIN` for them; log those that
    did not stop and what those that ended by themselves raised."""
    tasks = set(tasks)
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    done, pending = await asyncio.wait(tasks, timeout=STOP_WITHIN)
    for task in done:
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("%s had stopped: %s", task.get_name(), exc)
    for task in sorted(pending, key=lambda t: t.get_name()):
        log.warning(
            "%s did not stop within %gs of being cancelled; shutting down without it",
            task.get_name(),
            STOP_WITHIN,
        )
