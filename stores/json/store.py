"""The JSON store: the seed's file format, for small installs and migration."""

from __future__ import annotations

import copy
import fcntl
import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from chatbridge.core.ledger import (
    Hold,
    LedgerBook,
    LedgerRow,
    Settlement,
    Snapshot,
    Verdict,
    moved,
)
from chatbridge.core.links import CODE_TTL, LinkBook
from chatbridge.core.models import (
    ChannelCursor,
    Conversation,
    Exchange,
    InboxEntry,
    MemoryEntry,
    Session,
    Usage,
)
from chatbridge.core.ports.store import StoreError
from chatbridge.stores._base import StoreBase
from chatbridge.stores._codec import (
    TOMBSTONE_KEEP,
    copy_session,
    forgotten_since,
    pending_of,
    unreadable,
    user_hash,
)
from chatbridge.stores.json import _cursors, _inbox
from chatbridge.stores.json._files import (
    State,
    atomic_write,
    put,
    read_ring,
    read_state,
    ring_bytes,
    state_bytes,
)
from chatbridge.stores.json._ledger import (
    book_bytes,
    ledger_path,
    links_bytes,
    links_path,
    read_book,
    read_links,
)

T = TypeVar("T")


class JsonStore(StoreBase):
    """Everything in memory; every write rewrites whole files (O(total size) per commit).

    Meant for small installs and for migrating from the seed; use SQLite beyond
    a few hundred users. Writes block the event loop (two fsyncs per file).
    One process per file.

    Files: `path` is the ring, a flat JSON array of entries for all users in
    the seed's format plus `user` and `scope` (seed entries without them are
    migrated on load, see `_codec.entry_from_json`; the file is rewritten in
    the new form by the next write, never by `open`). `<path>.state.json`
    holds `{"sessions", "usage", "last_entry", "forgotten", "inbox",
    "inbox_done", "cursors"}`; `forgotten` maps the SHA-256 of each forgotten user ID to
    the wall-clock time of the forget (pruned after 7 days), so a reply in
    flight during `forget` is not written.
    The inbox lives in the state file too: `"inbox"` lists the pending entries
    (`_codec.inbox_to_json`) in insertion order, `"inbox_done"` maps each done
    key to the wall-clock time it was done (pruned after `DEDUPE_WINDOW` by the
    next add). Every inbox call that changes something rewrites the state file.

    Atomicity across two files: a commit writes the state file first, carrying
    the new entry as `last_entry`; that rename is the commit point. If the
    process dies before the ring file is rewritten, `open()` finds `last_entry`
    missing from the ring and appends it. `forget` also writes the state first,
    so a forgotten user's entry can never be replayed.
    """

    def __init__(self, path: Path, *, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._path = path
        self._state_path = path.with_name(f"{path.name}.state.json")
        self._max = max_entries
        self._ring: dict[str, list[MemoryEntry]] = {}  # by user, oldest first
        self._state = State()
        self._open = False
        self._lock_fd: int | None = None
        self._ledger_path = ledger_path(path)
        self._book = LedgerBook()
        self._links_path = links_path(path)
        self._links = LinkBook()

    async def open(self) -> None:
        """Load both files; a damaged one raises `StoreCorrupt` and is not touched.
        Open already: nothing to do (a second lock would refuse this process)."""
        if self._open:
            return
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise unreadable(self._path.parent, err) from err
        self._lock_directory()
        try:
            self._load()
        except BaseException:
            self._unlock_directory()
            raise
        self._open = True

    def _lock_directory(self) -> None:
        """One process per store: the whole file lives in this process's memory
        and is rewritten on each commit, so a second writer (or a CLI `forget`
        while `run` serves) would be silently undone. The lock is on the
        directory, so no lock file appears beside the data."""
        fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            raise StoreError(
                f"{self._path} is in use by another chatbridge process; the json store "
                "serves one process at a time (stop it, or use the sqlite store)"
            ) from err
        self._lock_fd = fd

    def _unlock_directory(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def _load(self) -> None:
        entries = read_ring(self._path)
        state = read_state(self._state_path)
        for f in (self._path.parent, self._path, self._state_path):
            if f.exists() and not os.access(f, os.W_OK):
                raise unreadable(f, PermissionError(13, "Permission denied"))
        book, links = read_book(self._ledger_path), read_links(self._links_path)
        self._state, self._ring, self._book, self._links = state, {}, book, links
        for entry in entries:
            self._ring.setdefault(entry.user, []).append(entry)
        for stale in self._path.parent.glob(f".{self._path.name}*.tmp"):
            stale.unlink()  # a write killed midway; it may hold text forget() must not miss
        last = self._state.last_entry
        if last is not None and self._ring.get(last.user, [None])[-1] != last:
            self._ring.setdefault(last.user, []).append(last)  # committed, ring write lost
            atomic_write(self._path, self._ring_bytes())

    async def load_session(self, key: str) -> Session | None:
        session = self._live().sessions.get(key)
        return None if session is None else copy_session(session, key)

    async def save_session(self, session: Session | None, *, key: str) -> None:
        sessions = self._live().sessions
        before = sessions.get(key)
        put(sessions, key, None if session is None else copy_session(session, key))
        try:
            atomic_write(self._state_path, state_bytes(self._state))
        except BaseException:  # also a value that cannot be encoded
            put(sessions, key, before)
            raise

    async def commit_exchange(self, exchange: Exchange) -> None:
        """Session, ring entry (filed under `ring_user`), usage and trim, committed at once.

        If the state write fails nothing changed. If only the ring write fails the
        exchange is committed (the state file has it) and `StoreError` still tells
        the caller the disk is in trouble. Writes nothing if `ring_user` was
        forgotten at or after the session started, except that the inbox entry
        `exchange.inbox_key` is marked done (in the same state write otherwise).
        """
        user, key, day = exchange.ring_user, exchange.session.key, exchange.day
        state = self._live()
        settled = exchange.settlement
        if settled is not None:  # the tokens were used, whatever happens to the exchange
            self._ledger_write(lambda book: book.settle(settled))
        undo_done = _inbox.mark_done(state, exchange.inbox_key)
        if forgotten_since(state.forgotten.get(user_hash(user)), exchange.session.started_at):
            if undo_done is not None:
                self._write_state(undo_done)
            return  # a reply in flight during forget(); see core.ports.store.Memory
        days = state.usage.setdefault(user, {})
        before = (self._ring.get(user), state.sessions.get(key), days.get(day), state.last_entry)
        entry = replace(exchange.entry, user=user)
        self._ring[user] = [*self._ring.get(user, []), entry][-self._max :]
        state.sessions[key] = copy_session(exchange.session, key)
        days[day] = days.get(day, Usage()) + exchange.usage
        state.last_entry = entry
        try:
            atomic_write(self._state_path, state_bytes(state))
        except BaseException:  # also a value that cannot be encoded
            put(self._ring, user, before[0])
            put(state.sessions, key, before[1])
            put(days, day, before[2])
            state.last_entry = before[3]
            if undo_done is not None:
                undo_done()
            raise
        atomic_write(self._path, self._ring_bytes())

    async def ring(self, user: str, *, since: float) -> list[MemoryEntry]:
        """Entries newer than `since`, oldest first; user "" (unknown owner) gets none."""
        self._live()
        if not user:
            return []
        return [e for e in self._ring.get(user, []) if e.timestamp > since][-self._max :]

    async def forget(self, user: str) -> None:
        """Drop the user everywhere (their pending inbox entries are marked
        done), leave a tombstone (pruning ones older than 7 days) and rewrite
        both files; the old files are unlinked."""
        state = self._live()
        now = time.time()
        state.forgotten = {h: at for h, at in state.forgotten.items() if at >= now - TOMBSTONE_KEEP}
        name = user_hash(user)
        state.forgotten[name] = max(now, state.forgotten.get(name, now))
        state.sessions = {k: s for k, s in state.sessions.items() if s.user != user}
        state.usage.pop(user, None)
        if state.last_entry is not None and state.last_entry.user == user:
            state.last_entry = None
        self._ring.pop(user, None)
        for key in pending_of(state.inbox.values(), user, now):
            _inbox.mark_done(state, key)
        atomic_write(self._state_path, state_bytes(state))
        atomic_write(self._path, self._ring_bytes())

    async def usage(self, user: str, *, day: str) -> Usage:
        return self._live().usage.get(user, {}).get(day, Usage())

    async def inbox_add(self, entry: InboxEntry) -> bool:
        """Also drops done markers older than `DEDUPE_WINDOW` before `entry.received_at`."""
        undo = _inbox.add(self._live(), entry)
        if undo is None:
            return False
        self._write_state(undo)
        return True

    async def inbox_add_many(self, entries: Sequence[InboxEntry]) -> list[bool]:
        """One state-file write for all of them; if it fails, none is added."""
        state, undos, added = self._live(), [], []
        try:
            for entry in entries:
                undo = _inbox.add(state, entry)
                added.append(undo is not None)
                if undo is not None:
                    undos.append(undo)
        except BaseException:  # a malformed entry: the ones before it go too
            _undo_all(undos)
            raise
        self._write_state(functools.partial(_undo_all, undos) if undos else None)
        return added

    async def inbox_progress(
        self, key: str, *, sent: tuple[str, ...], answer: str | None = None
    ) -> None:
        self._write_state(_inbox.progress(self._live(), key, sent, answer))

    async def inbox_done(self, key: str) -> None:
        self._write_state(_inbox.mark_done(self._live(), key))

    async def inbox_pending(self) -> list[InboxEntry]:
        return _inbox.pending(self._live())

    async def inbox_pending_of(self, conversation: Conversation) -> list[InboxEntry]:
        return _inbox.pending_of(self._live(), conversation)

    async def inbox_is_pending(self, key: str) -> bool:
        return key in self._live().inbox

    async def cursor_advance(self, platform: str, channel: str, last_id: int, *, at: float) -> None:
        """Rewrites the state file when the cursor moved (as every inbox call does)."""
        self._write_state(_cursors.advance(self._live(), platform, channel, last_id, at))

    async def cursors(self, platform: str, *, since: float, limit: int) -> list[ChannelCursor]:
        state = self._live()
        self._write_state(_cursors.forget_quiet(state, platform, since))
        return _cursors.recent(state, platform, limit)

    async def ledger_reserve(self, hold: Hold) -> Verdict:
        """Decide in memory, then rewrite the ledger file (`_ledger`)."""
        self._live()
        if hold.sender:
            group = self._links.group(hold.sender)
            relinked = moved(hold, group[0] if group else hold.sender)
            if relinked is not None:
                return relinked
        return self._ledger_write(lambda book: book.reserve(hold))

    async def ledger_settle(self, settlement: Settlement) -> None:
        self._live()
        self._ledger_write(lambda book: book.settle(settlement))

    async def ledger_snapshots(self, hold: Hold) -> dict[str, Snapshot]:
        self._live()
        return {a.key: self._book.snapshot(a.key, hold) for a in hold.accounts}

    async def ledger_rows(self, *, since_day: str) -> list[LedgerRow]:
        self._live()
        return self._book.rows(since_day=since_day)

    def _ledger_write(self, change: Callable[[LedgerBook], T]) -> T:
        """Apply `change` to a copy of the book; keep it only once it is on disk."""
        book = copy.deepcopy(self._book)
        result = change(book)
        atomic_write(self._ledger_path, book_bytes(book))
        self._book = book
        return result

    async def link_offer(self, user: str, code_hash: str, *, expires_at: float) -> None:
        now = expires_at - CODE_TTL  # codes all live CODE_TTL: older ones have expired
        self._links_write(lambda b: b.offer(user, code_hash, expires_at, now))

    async def link_take(self, code_hash: str, *, now: float) -> str | None:
        return self._links_write(lambda b: b.take(code_hash, now))

    async def link_attempt(self, user: str, *, now: float, failed: bool) -> float | None:
        return self._links_write(lambda b: b.attempt(user, now, failed))

    async def link_join(self, first: str, second: str) -> str:
        return self._links_write(lambda b: b.join(first, second))

    async def link_split(self, user: str) -> bool:
        return self._links_write(lambda b: b.split(user))

    async def link_group(self, user: str) -> tuple[str, ...]:
        self._live()
        return self._links.group(user)

    def _links_write(self, change: Callable[[LinkBook], T]) -> T:
        self._live()
        links = copy.deepcopy(self._links)
        result = change(links)
        atomic_write(self._links_path, links_bytes(links))
        self._links = links
        return result

    async def aclose(self) -> None:
        """Every write is already on disk; this refuses further use and frees the lock."""
        self._open = False
        self._unlock_directory()

    def _live(self) -> State:
        if not self._open:
            raise StoreError(f"{self._path} is not open")
        return self._state

    def _ring_bytes(self) -> bytes:
        return ring_bytes([e for entries in self._ring.values() for e in entries])

    def _write_state(self, undo: _inbox.Undo | None) -> None:
        """Write the state file after a change (none when `undo` is None); if that
        fails, `undo` the change in memory and re-raise."""
        if undo is None:
            return
        try:
            atomic_write(self._state_path, state_bytes(self._state))
        except BaseException:
            undo()
            raise


def _undo_all(undos: list[_inbox.Undo]) -> None:
    """Undo inbox changes, newest first."""
    for undo in reversed(undos):
        undo()
