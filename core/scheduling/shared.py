"""`ConversationScheduler` for replicas that share one inbox (Redis).

Whoever holds a conversation's lease answers its oldest pending message:
the holder reads the conversation's pending entries from the shared inbox
(`inbox_pending_of`, never the other conversations' backlog) under the
lease, answers the first in the platform's order, releases, and looks again
until none is left. A replica that accepted a message for a conversation
keeps a driver waiting for that lease, so whichever replica received each
message, they are answered one at a time in order and the request for
message n carries exactly the exchanges before it.

A dead holder: its lease is never extended and expires after the lease ttl;
a replica with waiting work for that conversation is already polling the
lease (every `poll` s), so it takes over as soon as the lease expires and
answers the oldest entry first, the dead holder's own, finishing a
half-streamed answer by editing what was posted. Work nobody waits for (the
dead replica was the only one that knew) is found by the sweep every
`sweep_every` s: a pending entry older than the ttl whose conversation no
one holds. A holder that stalled past its ttl and wakes up has a stale
fence, so its commit is refused (`LeaseLost`) and the entry stays for the
new holder.

Cancel mode: a replica accepting a message tells the others (`CancelNotices`),
which stop their reply to an older message; a holder drops an entry when a
newer one of its conversation is pending (CANCELLED).
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager

from chatbridge.core.clock import Clock, SystemClock
from chatbridge.core.models import Conversation, InboxEntry
from chatbridge.core.outcome import Outcome
from chatbridge.core.ports.store import (
    CancelNotices,
    ConversationLeases,
    Lease,
    PendingByConversation,
    StoreError,
)
from chatbridge.core.scheduling._base import SchedulerBase

__all__ = ["SharedInboxScheduler"]

log = logging.getLogger(__name__)

MAX_SWEEP_EVERY = 5.0  # s; the sweep runs every ttl/3, at least this often


class SharedInboxScheduler(SchedulerBase):
    """See the module docstring. `lease_ttl` must be the leases' own ttl."""

    reads_inbox = True

    def __init__(
        self,
        inbox: PendingByConversation,
        leases: ConversationLeases,
        notices: CancelNotices,
        *,
        lease_ttl: float,
        clock: Clock | None = None,
        sweep_every: float | None = None,
    ) -> None:
        super().__init__()
        self._inbox = inbox
        self._leases = leases
        self._notices = notices
        self._ttl = lease_ttl
        self._clock = clock or SystemClock()
        self._sweep_every = sweep_every or min(lease_ttl / 3, MAX_SWEEP_EVERY)
        self._drivers: dict[str, asyncio.Task[None]] = {}
        self._wanted: set[str] = set()  # conversations with work since their driver last looked

    async def submit(self, entry: InboxEntry, *, fresh: bool = True) -> bool:
        work = self.work
        if not work.ordered(entry):
            return self._run_command(entry)
        conversation = entry.message.conversation
        key = conversation.key
        if fresh and work.supersedes(entry):
            self._supersede(entry)
            await self._notices.publish(key, received_at=entry.received_at)
        self._wanted.add(key)
        if key not in self._drivers:
            self._drivers[key] = self._spawn(self._drive(conversation))
        return True

    async def start(self) -> None:
        if self._background or self._draining:
            return
        self.run_beside(self._sweep_loop(), name="inbox sweep")
        self.run_beside(self._listen(), name="cancel notices")

    def hold(self, conversation: str) -> AbstractAsyncContextManager[Lease]:
        return self._leases.hold(conversation)

    async def _drive(self, conversation: Conversation) -> None:
        """Take the lease, answer the oldest pending entry, release; again
        until the conversation has nothing pending that this replica serves."""
        key = conversation.key
        try:
            while True:
                self._wanted.discard(key)
                async with self._leases.hold(key) as lease:
                    entry, newer = await self._oldest(conversation)
                    if entry is None:
                        if key in self._wanted:
                            continue  # accepted while we looked
                        # Gone before the release awaits: a submit from here
                        # on starts a new driver, which waits for the lease.
                        self._drivers.pop(key, None)
                        return
                    if newer:
                        await self.work.close(entry, Outcome.CANCELLED)
                    else:
                        await self._run(key, entry, lease.fence)
        except StoreError as exc:  # the sweep comes back to it
            log.warning("could not answer in %s now: %s", conversation.chat_id, exc)
        finally:
            if self._drivers.get(key) is asyncio.current_task():
                del self._drivers[key]

    async def _oldest(self, conversation: Conversation) -> tuple[InboxEntry | None, bool]:
        """The conversation's oldest pending entry to answer here, and whether a
        newer one supersedes it (cancel mode)."""
        work = self.work
        pending = await self._inbox.inbox_pending_of(conversation)
        mine = [e for e in pending if work.ordered(e) and work.serves(e)]
        if not mine:
            return None, False
        mine.sort(key=lambda e: e.message.order)  # stable: inbox order within
        first = mine[0]
        newer = work.supersedes(first) and any(work.supersedes(e) for e in mine[1:])
        return first, newer

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_every)
            try:
                await self.sweep()
            except StoreError as exc:
                log.warning("inbox sweep failed: %s", exc)

    async def sweep(self) -> int:
        """Schedule what a dead replica left: pending entries older than the
        lease ttl whose conversation nobody holds; returns how many."""
        work, now, count = self.work, self._clock.now(), 0
        for entry in await self._inbox.inbox_pending():
            if now - entry.received_at <= self._ttl or not work.serves(entry):
                continue
            key = entry.message.conversation.key
            if work.ordered(entry):
                if key in self._drivers or await self._leases.is_held(key):
                    continue
            elif entry.key in self._known:
                continue
            log.info("answering %s, which another replica left", entry.key)
            await self.submit(entry, fresh=False)
            count += 1
        return count

    async def _listen(self) -> None:
        async with self._notices.listen(self._on_notice):
            await asyncio.Event().wait()  # until drain cancels it

    def _on_notice(self, key: str, received_at: float) -> None:
        """Another replica accepted a newer message for `key`."""
        self._supersede_at(key, received_at)
