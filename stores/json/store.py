"""The JSON store: the seed's file format, for small installs and migration."""

from __future__ import annotations

import copy
import fcntl
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

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
from chatbridge.core.ports.store import DEDUPE_WINDOW, StoreError
from chatbridge.stores._base import StoreBase
from chatbridge.stores._codec import (
    TOMBSTONE_KEEP,
    answer_to_json,
    copy_session,
    forgotten_since,
    inbox_to_json,
    pending_of,
    sent_to_json,
    unreadable,
    user_hash,
)
from chatbridge.stores.json._files import (
    State,
    atomic_write,
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
        """Load both files; a damaged one raises `StoreCorrupt` and is not touched."""
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
        _put(sessions, key, None if session is None else copy_session(session, key))
        try:
            atomic_write(self._state_path, state_bytes(self._state))
        except BaseException:  # also a value that cannot be encoded
            _put(sessions, key, before)
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
        undo_done = _mark_done(state, exchange.inbox_key)
        if forgotten_since(state.forgotten.get(user_hash(user)), exchange.session.started_at):
            if undo_done is not None:
                self._write_state(undo_done)
            return  # a reply in flight during forget(); see base.Store.forget
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
            _put(self._ring, user, before[0])
            _put(state.sessions, key, before[1])
            _put(days, day, before[2])
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
            _mark_done(state, key)
        atomic_write(self._state_path, state_bytes(state))
        atomic_write(self._path, self._ring_bytes())

    async def usage(self, user: str, *, day: str) -> Usage:
        return self._live().usage.get(user, {}).get(day, Usage())

    async def inbox_add(self, entry: InboxEntry) -> bool:
        """Also drops done markers older than `DEDUPE_WINDOW` before `entry.received_at`."""
        state = self._live()
        inbox_to_json(entry)  # TypeError for a field of the wrong type, before any change
        cutoff = entry.received_at - DEDUPE_WINDOW
        done_at = state.inbox_done.get(entry.key)
        if entry.key in state.inbox or (done_at is not None and done_at >= cutoff):
            return False
        done = state.inbox_done
        state.inbox_done = {k: at for k, at in done.items() if at >= cutoff}
        state.inbox[entry.key] = entry

        def undo() -> None:
            del state.inbox[entry.key]
            state.inbox_done = done

        self._write_state(undo)
        return True

    async def inbox_progress(
        self, key: str, *, sent: tuple[str, ...], answer: str | None = None
    ) -> None:
        state = self._live()
        old = state.inbox.get(key)
        if old is None:
            return
        refs, answer = tuple(sent_to_json(sent)), answer_to_json(answer)  # TypeError first
        answer = old.answer if answer is None else answer
        state.inbox[key] = replace(old, sent=refs, answer=answer)  # keeps its place

        def undo() -> None:
            state.inbox[key] = old

        self._write_state(undo)

    async def inbox_done(self, key: str) -> None:
        undo = _mark_done(self._live(), key)
        if undo is not None:
            self._write_state(undo)

    async def inbox_pending(self) -> list[InboxEntry]:
        """Oldest `received_at` first; `sorted` is stable, so ties keep insertion order."""
        return sorted(self._live().inbox.values(), key=lambda e: e.received_at)

    async def inbox_pending_of(self, conversation: Conversation) -> list[InboxEntry]:
        """The conversation's pending entries, oldest first: a filter in memory
        (one process only, and its pending entries are few)."""
        mine = [e for e in self._live().inbox.values() if e.message.conversation == conversation]
        return sorted(mine, key=lambda e: e.received_at)

    async def inbox_is_pending(self, key: str) -> bool:
        return key in self._live().inbox

    async def cursor_advance(self, platform: str, channel: str, last_id: int, *, at: float) -> None:
        """Rewrites the state file when the cursor moved (as every inbox call does)."""
        channels = self._live().cursors.setdefault(platform, {})
        old = channels.get(channel)
        new = (last_id, at) if old is None else (max(old[0], last_id), max(old[1], at))
        if new == old:
            return
        channels[channel] = new

        def undo() -> None:
            _put(channels, channel, old)

        self._write_state(undo)

    async def cursors(self, platform: str, *, since: float, limit: int) -> list[ChannelCursor]:
        channels = self._live().cursors.get(platform, {})
        quiet = {c: v for c, v in channels.items() if v[1] < since}
        if quiet:
            for channel in quiet:
                del channels[channel]

            def undo() -> None:
                channels.update(quiet)

            self._write_state(undo)
        recent = sorted(channels.items(), key=lambda item: item[1][1], reverse=True)[:limit]
        return [ChannelCursor(platform, c, last, at) for c, (last, at) in recent]

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

    def _write_state(self, undo: Callable[[], None]) -> None:
        """Write the state file; if that fails, `undo` the change in memory and re-raise."""
        try:
            atomic_write(self._state_path, state_bytes(self._state))
        except BaseException:
            undo()
            raise


def _mark_done(state: State, key: str) -> Callable[[], None] | None:
    """Mark a pending `key` done in memory (dropping its text); returns how to
    undo that, or None if `key` is empty or not pending."""
    if not key or key not in state.inbox:
        return None
    inbox, before = dict(state.inbox), state.inbox_done.get(key)  # pending: a few entries
    del state.inbox[key]
    state.inbox_done[key] = time.time()

    def undo() -> None:
        state.inbox = inbox  # the entry back in its place, so ties keep their order
        _put(state.inbox_done, key, before)

    return undo


def _put(d: dict[str, Any], key: str, value: Any) -> None:
    """Set, or remove when `value` is None (undoing an insert)."""
    if value is None:
        d.pop(key, None)
    else:
        d[key] = value
