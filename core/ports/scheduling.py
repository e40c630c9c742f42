"""How conversations take turns: the contract between the engine and its scheduler.

The engine accepts a message into the inbox, hands the entry to a
`ConversationScheduler` and says how one entry is answered (`ConversationWork`);
the scheduler decides when: one answer at a time per conversation, the
conversation's oldest pending message first (in the platform's own order),
different conversations side by side. It owns the leases, the order, the
cancelling of replies in flight, the tasks, taking over what a dead holder
left and the sweep, so the engine knows no replica. Modelled on
python-telegram-bot's `BaseUpdateProcessor`, the small concurrency strategy
its `Application` delegates to.

Two implementations, chosen by the composition root from the store backend:
`core.scheduling.local.LocalScheduler` (one process, in-process locks) and
`core.scheduling.shared.SharedInboxScheduler` (replicas sharing the inbox,
with the `ConversationLeases` and `CancelNotices` a shared store gives,
`core.ports.store.Replication`).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from chatbridge.core.models import InboxEntry
from chatbridge.core.outcome import Outcome
from chatbridge.core.ports.store import Lease

__all__ = ["ConversationScheduler", "ConversationWork"]


class ConversationWork(Protocol):
    """What the engine tells its scheduler about entries, and how one is answered."""

    def serves(self, entry: InboxEntry) -> bool:
        """True when this process can answer `entry` (its platform is attached)."""
        ...

    def ordered(self, entry: InboxEntry) -> bool:
        """True when `entry` waits for its conversation's turn; False (a
        command) runs at once, beside the conversation's answers."""
        ...

    def supersedes(self, entry: InboxEntry) -> bool:
        """True when `entry` makes its conversation's older messages moot
        (cancel mode): their reply in flight is stopped, waiting ones dropped."""
        ...

    async def run(self, entry: InboxEntry, fence: int) -> None:
        """Answer `entry` and close it (`close`); raises only `CancelledError`."""
        ...

    async def close(self, entry: InboxEntry, outcome: Outcome) -> None:
        """Close `entry` with `outcome` without answering it (cancelled, left)."""
        ...


class ConversationScheduler(Protocol):
    """Decides when each accepted inbox entry is answered (see the module docstring)."""

    reads_inbox: bool
    """True when it picks what to answer from the store's pending entries
    (replicas), so an entry is answered once stored, submitted or not; False
    when it answers the entries submitted to it, in that order (one process)."""

    def bind(self, work: ConversationWork) -> None:
        """The engine's side; called once, before anything is submitted."""
        ...

    async def submit(self, entry: InboxEntry, *, fresh: bool = True) -> bool:
        """Schedule `entry`, which the inbox holds; False when it already is.
        `fresh`: just accepted (in cancel mode it then supersedes older
        replies, here and on other replicas); False for one found in the inbox."""
        ...

    async def start(self) -> None:
        """Begin the background work (sweep, notices), if any; idempotent."""
        ...

    def cancel(self, conversation: str) -> None:
        """Stop the reply in flight for a conversation (its HTTP stream closes)."""
        ...

    def hold(self, conversation: str) -> AbstractAsyncContextManager[Lease]:
        """Wait for the conversation's turn and keep it while the block runs."""
        ...

    def idle(self) -> bool:
        """True when nothing is being answered or waits here."""
        ...

    async def drain(self, grace: float) -> None:
        """Stop the background work; let answers in flight and waiting ones
        finish for up to `grace` s, then cut the rest (they stay in the inbox)."""
        ...
