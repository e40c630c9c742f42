"""The store's contracts: what every backend (`chatbridge.stores.sqlite`,
`.redis`, `.json`) implements, and what the rest of chatbridge asks of it.

`Store` is one object made of small contracts, so a part of core can ask for
the slice it uses (`Inbox`, `Ledger`, `Links`, `ChannelCursors`, ...):

    Store        open / aclose (also `async with`), replication
    ├── Sessions         load_session, save_session
    ├── Memory           commit_exchange, ring, forget, usage
    ├── Inbox            inbox_add, _add_many, _progress, _done, _is_pending
    │   └── PendingByConversation  inbox_pending, _pending_of (what a scheduler reads)
    ├── ChannelCursors   cursor_advance, cursors
    ├── Ledger           ledger_reserve, _settle, _snapshots, _rows
    └── Links            link_offer, _take, _attempt, _join, _split, _group

A store shared by replicas (Redis) also gives the conversation leases and
cancel notices the replicas' scheduler needs (`Store.replication`); the
others give none. The composition root opens a store by its settings
(`StoreSettings`, `chatbridge.stores.open_store`) and never names a backend.

Error tree::

    StoreError                 the store cannot be used; message names the file/URL
    ├── StoreCorrupt           the file exists but cannot be read; it is left untouched
    └── LeaseLost              a newer holder has the conversation's lease; nothing written
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self

from chatbridge.core.ledger import Hold, LedgerRow, Settlement, Snapshot, Verdict
from chatbridge.core.models import (
    ChannelCursor,
    Conversation,
    Exchange,
    InboxEntry,
    MemoryEntry,
    Session,
    Usage,
)

__all__ = [
    "DEDUPE_WINDOW",
    "CancelNotices",
    "ChannelCursors",
    "ConversationLeases",
    "Inbox",
    "Lease",
    "LeaseLost",
    "Ledger",
    "Links",
    "Memory",
    "PendingByConversation",
    "Replication",
    "Sessions",
    "Store",
    "StoreCorrupt",
    "StoreError",
    "StoreSettings",
]


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """What opens a store: the backend's name and where its data is.

    `path` is used by "sqlite" and "json", `url` only by "redis"."""

    backend: str
    path: Path
    url: str
    max_entries: int


class Sessions(Protocol):
    """The sessions by key (a session is the conversation's recent turns)."""

    async def load_session(self, key: str) -> Session | None: ...

    async def save_session(self, session: Session | None, *, key: str) -> None:
        """Replace the stored session for `key`; `None` deletes it (/new)."""
        ...


class Memory(Protocol):
    """What is remembered of each exchange: the session, the user's ring, usage.

    `commit_exchange` is the main write on the hot path and is atomic: after it
    returns, a killed process still finds the session, the ring entry and the
    usage on restart; before it returns, none of them.
    """

    async def commit_exchange(self, exchange: Exchange) -> None:
        """Store session + ring entry + usage at once, then trim the ring.

        If `exchange.ring_user` was forgotten at or after
        `exchange.session.started_at` (a reply that was in flight during
        `forget`, whose session holds the forgotten history), nothing at all is
        written and the call returns normally. The check is part of the same
        transaction; a session started after the forget is stored as usual.
        The inbox entry `exchange.inbox_key` (if set) is marked done in the
        same transaction, in both cases.

        With `exchange.fence` > 0 a store shared by replicas (redis) raises
        `LeaseLost` and writes nothing when the lease of `exchange.fence_key`
        was taken with a higher fence since (checked in the same transaction);
        single-process stores ignore the fence.
        """
        ...

    async def ring(self, user: str, *, since: float) -> list[MemoryEntry]:
        """The user's entries newer than `since`, oldest first, at most max_entries."""
        ...

    async def forget(self, user: str) -> None:
        """Erase the user's ring, sessions and usage so nothing stays readable.

        In the same transaction it records a tombstone: the SHA-256 hex of
        `user` (never the ID itself) and the wall-clock time of the forget
        (`time.time()`), which `commit_exchange` honours so the forget sticks.
        Session start times come from the engine's clock, which must therefore
        be wall time. Tombstones may be dropped after 7 days.
        """
        ...

    async def usage(self, user: str, *, day: str) -> Usage: ...


class ChannelCursors(Protocol):
    """Where a platform that never redelivers keeps its place in each channel.

    Discord replays nothing sent while no gateway session was live, so its
    adapter records, per channel, the newest message it handed to the inbox and
    reads what came after it on start and after a lost session (its catch-up).
    """

    async def cursor_advance(self, platform: str, channel: str, last_id: int, *, at: float) -> None:
        """Record `last_id` as handled in `channel` at wall time `at`, durably.

        A cursor never moves back: a smaller `last_id` than the stored one
        keeps the stored one (and `at` only ever moves forward too).
        """
        ...

    async def cursors(self, platform: str, *, since: float, limit: int) -> list[ChannelCursor]:
        """The channels of `platform` with traffic at or after `since`, the
        most recent first, at most `limit`. Channels quieter than `since` are
        forgotten (deleted) on the way."""
        ...


@dataclass(frozen=True, slots=True)
class Lease:
    """A conversation's turn, held. `fence` is the fencing ticket a store commit
    checks (it grows with every new holder); 0 for an in-process lock."""

    key: str
    fence: int = 0


class ConversationLeases(Protocol):
    """Grants one holder at a time per conversation key, FIFO within a process."""

    def hold(self, key: str) -> AbstractAsyncContextManager[Lease]:
        """Wait for `key`'s turn and keep it (alive, for a lease with a timeout)
        until the block is left."""
        ...

    async def is_held(self, key: str) -> bool:
        """True while some holder (here or elsewhere) has `key`'s turn."""
        ...


class CancelNotices(Protocol):
    """Cancel mode across replicas: tells the others that a conversation got a
    newer message, so they stop their reply to an older one."""

    async def publish(self, key: str, *, received_at: float) -> None:
        """Announce a message for conversation `key` received at `received_at`."""
        ...

    def listen(self, on_notice: Callable[[str, float], None]) -> AbstractAsyncContextManager[None]:
        """Call `on_notice(key, received_at)` for other replicas' notices while
        the block runs (subscribed once it is entered)."""
        ...


@dataclass(frozen=True, slots=True)
class Replication:
    """What replicas sharing one store use to take turns: the conversation
    leases and the cancel notices, both in the shared store."""

    leases: ConversationLeases
    notices: CancelNotices


class Links(Protocol):
    """Which platform IDs are one person (`core.links`), shared by every replica.

    Each call is one atomic step. Codes are stored only as hashes.
    """

    async def link_offer(self, user: str, code_hash: str, *, expires_at: float) -> None:
        """Store `user`'s new code (replacing an earlier one of theirs; expired codes go)."""
        ...

    async def link_take(self, code_hash: str, *, now: float) -> str | None:
        """Remove the code and return who offered it; None if unknown or expired."""
        ...

    async def link_attempt(self, user: str, *, now: float, failed: bool) -> float | None:
        """The time `/link` stays locked for `user`, or None; `failed` counts one
        wrong code first (the `LOCK_AFTER`th locks for `LOCK_FOR` s)."""
        ...

    async def link_join(self, first: str, second: str) -> str:
        """`second` (and whoever is linked with it) joins `first`'s person; returns
        the person key. Clears `second`'s wrong-code count."""
        ...

    async def link_split(self, user: str) -> bool:
        """Take `user` out of its person (a person of one is dissolved); False if unlinked."""
        ...

    async def link_group(self, user: str) -> tuple[str, ...]:
        """(person key, *member IDs sorted) of `user`'s person, or () when unlinked."""
        ...


class Ledger(Protocol):
    """Limit counters per account (`core.ledger`), shared by every replica.

    Counters survive `forget`: they hold numbers, no text, and a person must
    not reset a budget by /forget.
    """

    async def ledger_reserve(self, hold: Hold) -> Verdict:
        """Atomically: record `hold` if it fits every limit of every account
        (`core.ledger.decide`, unexpired holds included); else count a refusal
        on each account and record a rate notice when the verdict notifies.
        With `hold.sender`, first read that ID's link in the same atomic step:
        the hold must be on its person's account, else nothing is written and
        the verdict is `core.ledger.moved` (so a link made by any replica
        counts from the next message on, with no lookup of its own)."""
        ...

    async def ledger_settle(self, settlement: Settlement) -> None:
        """Atomically drop the hold and add what was used (a request) to the
        day and month of each account; an unknown or expired hold id is fine."""
        ...

    async def ledger_snapshots(self, hold: Hold) -> dict[str, Snapshot]:
        """What `decide` would see for `hold` now (for /status), without writing."""
        ...

    async def ledger_rows(self, *, since_day: str) -> list[LedgerRow]:
        """Every account's day counters from `since_day` on (for `chatbridge usage`)."""
        ...


class PendingByConversation(Protocol):
    """The part of the inbox a scheduler reads."""

    async def inbox_pending(self) -> list[InboxEntry]:
        """Every entry not done, oldest `received_at` first."""
        ...

    async def inbox_pending_of(self, conversation: Conversation) -> list[InboxEntry]:
        """The entries of `conversation` not done, oldest `received_at` first
        (ties in the order they were added). Reads that conversation's entries
        only, whatever else is pending (an index, a set per conversation)."""
        ...


class Inbox(PendingByConversation, Protocol):
    """Received messages, held durably until their answer is remembered.

    Life of an entry: `inbox_add` (before the platform is acknowledged) ->
    `inbox_progress` (what was posted so far, then the final answer before
    its final delivery) -> done, either in `Store.commit_exchange` (when
    `exchange.inbox_key` names it, in the same transaction) or by
    `inbox_done` (commands, refusals, failures, notices).

    A done entry keeps only its key and time (no text) for `DEDUPE_WINDOW`
    seconds, so a platform's redelivery in that window is still refused.
    """

    async def inbox_add(self, entry: InboxEntry) -> bool:
        """Store `entry` at once and durably; False (and nothing written) when
        its key is already pending or was done within `DEDUPE_WINDOW`."""
        ...

    async def inbox_add_many(self, entries: Sequence[InboxEntry]) -> list[bool]:
        """`inbox_add` of each of `entries` in order, in one write where the
        backend has one (SQLite: one transaction; JSON: one state-file write),
        so a console's piped lines of one read cost one write; what each add
        returned. If the write fails none is stored, except on Redis, which
        runs one atomic add per entry and keeps those before the failing one."""
        ...

    async def inbox_progress(
        self, key: str, *, sent: tuple[str, ...], answer: str | None = None
    ) -> None:
        """Record the messages posted so far and, once known, the final answer
        (`None` keeps a recorded answer). A key not pending is ignored."""
        ...

    async def inbox_done(self, key: str) -> None:
        """Mark the entry done without an exchange; its text is erased."""
        ...

    async def inbox_is_pending(self, key: str) -> bool:
        """True while `key` was added and is not done (one cheap read)."""
        ...


DEDUPE_WINDOW = 3600.0
"""How long a done entry's key keeps refusing redeliveries (Slack retries for
~5 minutes, Telegram webhooks for longer; an hour covers both)."""


class StoreError(Exception):
    """The store cannot be opened or written; the message names the file or URL."""


class StoreCorrupt(StoreError):
    """The store file exists but cannot be read. It is never emptied or rewritten."""


class LeaseLost(StoreError):
    """Another replica took the conversation's lease; the exchange was not written."""


class Store(Sessions, Memory, Inbox, ChannelCursors, Ledger, Links, Protocol):
    """Everything chatbridge keeps, in one backend; opened before use (or
    entered with `async with`, which opens it and closes it on the way out)."""

    async def open(self) -> None:
        """Create or check the file / connect, before any other call; raises
        `StoreError` (naming the file or URL) when the store cannot be used.
        Opening an open store does nothing."""
        ...

    async def aclose(self) -> None:
        """Flush and release files/connections; safe to call twice."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def replication(self, *, lease_ttl: float) -> Replication | None:
        """The leases (expiring `lease_ttl` s after their holder died) and
        notices of a store shared by replicas; None for a single-process store."""
        ...
