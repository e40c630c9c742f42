"""`ConversationScheduler` for one process: per conversation a queue in the
platform's order and an in-process lock, one answer at a time."""

from __future__ import annotations

import heapq
import itertools
from contextlib import AbstractAsyncContextManager

from chatbridge.core.models import InboxEntry
from chatbridge.core.outcome import Outcome
from chatbridge.core.ports.store import Lease
from chatbridge.core.scheduling._base import SchedulerBase
from chatbridge.core.scheduling.locks import KeyedLocks

__all__ = ["LocalScheduler"]

_Queued = tuple[tuple[int, int], InboxEntry]


class LocalScheduler(SchedulerBase):
    """Every entry of a conversation waits in its queue; one task per
    conversation with waiting entries (its driver) takes the conversation's
    lock for each, answering the oldest first (platform order, then arrival).
    In cancel mode an entry with a newer one waiting is dropped (CANCELLED).
    Nothing here outlives the process: `resume` schedules what the inbox
    holds after a restart."""

    def __init__(self) -> None:
        super().__init__()
        self._locks = KeyedLocks()
        self._queues: dict[str, list[_Queued]] = {}
        self._drivers: dict[str, object] = {}
        self._queued: set[str] = set()  # entry keys waiting or being answered
        self._arrivals = itertools.count()

    async def submit(self, entry: InboxEntry, *, fresh: bool = True) -> bool:
        work = self.work
        if not work.ordered(entry):
            return self._run_command(entry)
        if entry.key in self._queued:
            return False
        self._queued.add(entry.key)
        key = entry.message.conversation.key
        if fresh and work.supersedes(entry):
            self._supersede(entry)
        rank = (entry.message.order, next(self._arrivals))
        heapq.heappush(self._queues.setdefault(key, []), (rank, entry))
        if key not in self._drivers:
            self._drivers[key] = self._spawn(self._drive(key))
        return True

    async def start(self) -> None:
        return None

    def hold(self, conversation: str) -> AbstractAsyncContextManager[Lease]:
        return self._locks.hold(conversation)

    async def _drive(self, key: str) -> None:
        work = self.work
        try:
            while self._queues.get(key):
                async with self._locks.hold(key) as lease:
                    queue = self._queues.get(key)
                    if not queue:
                        break
                    _, entry = heapq.heappop(queue)
                    try:
                        if work.supersedes(entry) and any(work.supersedes(e) for _, e in queue):
                            await work.close(entry, Outcome.CANCELLED)
                        else:
                            await self._run(key, entry, lease.fence)
                    finally:
                        self._queued.discard(entry.key)
        finally:
            self._drivers.pop(key, None)
            if not self._queues.get(key):
                self._queues.pop(key, None)
