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


class SchedulerBase:
    """Tasks, replies in flight and draining; subclasses decide whose turn it is."""

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
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
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
        self._draining = True
        for task in list(self._background):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        tasks = [t for t in self._tasks if not t.done()]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=2.0)
