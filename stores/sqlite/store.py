"""The SQLite store: the default backend."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from chatbridge.core.ledger import (
    Hold,
    LedgerBook,
    LedgerRow,
    Settlement,
    Snapshot,
    Tally,
    Used,
    Verdict,
    moved,
)
from chatbridge.core.links import CODE_TTL
from chatbridge.core.models import (
    ChannelCursor,
    Conversation,
    Exchange,
    InboxEntry,
    MemoryEntry,
    Session,
    Turn,
    Usage,
)
from chatbridge.core.ports.store import StoreError
from chatbridge.stores._base import StoreBase
from chatbridge.stores._codec import TOMBSTONE_KEEP, pending_of, unreadable, user_hash
from chatbridge.stores.sqlite import (
    _check,
    _cursors,
    _file,
    _inbox,
    _ledger,
    _links,
    _wal,
)
from chatbridge.stores.sqlite._rows import RowReader, chained, reason

T = TypeVar("T")
_COUNTED_KEPT = 50_000  # cached (account, period) counters before the cache starts over
_SESSIONS_KEPT = 1_000  # sessions kept in memory before that cache starts over

_UPSERT_SESSION = """
INSERT INTO sessions(key, user, started_at, last_active) VALUES (?, ?, ?, ?)
ON CONFLICT(key) DO UPDATE SET user = excluded.user, started_at = excluded.started_at,
    last_active = excluded.last_active"""
# Turns are rows, appended per exchange: rewriting a 40-turn session as one
# blob cost more than the rest of the commit together.
_INSERT_TURN = """
INSERT INTO turns(key, id, role, content)
VALUES (?1, (SELECT coalesce(max(id), 0) + 1 FROM turns WHERE key = ?1), ?2, ?3)"""
# Keep the session's newest ?2 turns (then its new ones are added); older
# ones (or an expired session's) go.
_TRIM_TURNS = """
DELETE FROM turns WHERE key = ?1 AND id <= (
    SELECT id FROM turns WHERE key = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)"""
_INSERT_ENTRY = """
INSERT INTO ring(user, id, timestamp, user_message, assistant_summary, session_name, workdir, scope)
VALUES (?1, (SELECT coalesce(max(id), 0) + 1 FROM ring WHERE user = ?1), ?2, ?3, ?4, ?5, ?6, ?7)"""
_ADD_USAGE = """
INSERT INTO usage(user, day, input_tokens, output_tokens) VALUES (?, ?, ?, ?)
ON CONFLICT(user, day) DO UPDATE SET input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens"""
# Everything older than the user's newest ?2 rows (`max_entries` - 1, run
# before the new entry's insert); NULL (no-op) when fewer.
_TRIM = """
DELETE FROM ring WHERE user = ?1 AND id <= (
    SELECT id FROM ring WHERE user = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)"""
# Newest first straight off the (user, id) key; reversing in Python beats a sort step.
_RING = """
SELECT id, timestamp, user_message, assistant_summary, session_name, workdir, user, scope
FROM ring WHERE user = ? AND timestamp > ? ORDER BY id DESC LIMIT ?"""
# A user's whole ring (at most ?2 rows are read), to keep in memory.
_WHOLE_RING = """
SELECT id, timestamp, user_message, assistant_summary, session_name, workdir, user, scope
FROM ring WHERE user = ? ORDER BY id DESC LIMIT ?"""
_SESSION = "SELECT rowid, user, started_at, last_active FROM sessions WHERE key = ?"
_DATA_VERSION = "PRAGMA data_version"
_TURNS = "SELECT id, role, content FROM turns WHERE key = ? ORDER BY id"
# usage has no rowid (WITHOUT ROWID); a damaged row is named by its day.
_USAGE = "SELECT day, input_tokens, output_tokens FROM usage WHERE user = ? AND day = ?"
# A forget at or after the session's start: the exchange must not be written.
# The commit's session upsert, unless ?5 (the ring owner's hash) has a tombstone
# at or after ?3 (the session's start): one statement for the check and the
# write, whose `rowcount` (0: forgotten) says which happened. (`WHERE` also
# keeps SQLite from parsing `ON CONFLICT` as a join constraint.)
_UPSERT_SESSION_UNFORGOTTEN = """
INSERT INTO sessions(key, user, started_at, last_active) SELECT ?1, ?2, ?3, ?4
WHERE NOT EXISTS (SELECT 1 FROM forgotten WHERE user_hash = ?5 AND at >= ?3)
ON CONFLICT(key) DO UPDATE SET user = excluded.user, started_at = excluded.started_at,
    last_active = excluded.last_active"""
# Read paths decode row by row (`_rows`): a damaged row is skipped, not raised.
_RING_COLS = "id timestamp user_message assistant_summary session_name workdir user scope"
_SESSION_COLS = "rowid user started_at last_active"
_INBOX_COLS = "key received_at message answer sent"
_TOMBSTONE = """
INSERT INTO forgotten(user_hash, at) VALUES (?, ?)
ON CONFLICT(user_hash) DO UPDATE SET at = max(at, excluded.at)"""


class SqliteStore(StoreBase):
    """Sessions, rings and usage in one SQLite file (WAL mode).

    Durability: `synchronous=NORMAL` in WAL mode means a commit is in the OS
    once `commit_exchange` returns, so it survives a killed or crashed process
    — which is what we promise. A power cut may lose the last few commits
    (never corrupt the file); that trade buys a commit without an fsync.

    Calls run on the event loop thread with the stdlib `sqlite3`: a commit
    plus context read costs tens of microseconds of SQLite work (no fsync), and
    a round trip through a worker thread (`asyncio.to_thread`) costs more than
    that by itself (80-130 µs measured on the CI VM). One thread also
    serialises writes for free. Only checkpoints (every
    `_wal.CHECKPOINT_EVERY` writes) and `forget` take milliseconds.

    Privacy: `secure_delete=ON` zeroes deleted rows in place, and `forget`
    checkpoints the WAL and truncates it, so the forgotten text is in neither
    the database nor the `-wal` file afterwards. `forget` also leaves a
    tombstone (SHA-256 of the user ID, wall-clock time) in `forgotten`, which
    `commit_exchange` checks in its transaction so a reply that was in flight
    cannot write the user back; tombstones older than 7 days are pruned by the
    next `forget`.

    Several processes may share a file (WAL: readers never block the writer),
    so admin commands work while the bot runs. A session or a user's ring
    this connection read whole or committed is kept in memory and served
    again only while SQLite's `data_version` says no other connection has
    committed since (one PRAGMA per read): what another process changed is
    seen at once.

    An existing file is vetted read-only before it is opened for writing; a
    damaged or foreign file, or a `-wal` older than the file's last
    checkpoint (`_wal`), raises `StoreCorrupt` and stays byte-identical.
    A row damaged later (text that is not UTF-8, a value of the wrong type)
    costs only that row: reads skip it and report it once by table and row
    id (`_rows`), so the conversation goes on without it. No error
    message quotes stored text.

    The inbox (`_inbox`) is one table in the same file: add, progress
    and done are one autocommit statement each (one write transaction, so
    the redelivery check holds across processes), and `commit_exchange` marks
    its entry done inside its own transaction.
    """

    def __init__(self, path: Path, *, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._path = path
        self._max = max_entries
        self._db: sqlite3.Connection | None = None
        self._wal: _wal.WalMarker | None = None
        self._vacuum_on_forget = False
        self._inbox_adds = 0  # every PRUNE_EVERY-th add prunes old done markers
        self._rows = RowReader(path)
        self._holds = LedgerBook()  # this process's holds and stamps (`_ledger`)
        # The file's counters as read, [tokens, nano-dollars] by (account, period).
        self._counted: dict[tuple[str, str], list[int]] = {}
        self._groups: dict[str, tuple[str, ...]] = {}  # link groups, as read
        self._sessions: dict[str, Session] = {}  # as stored, while `_version` holds
        self._rings: dict[str, list[MemoryEntry]] = {}  # whole rings, oldest first, likewise
        self._version = -1  # the file's `data_version` the kept sessions are of

    async def open(self) -> None:
        """Create the file (and parent dir) if missing, else vet it; then connect."""
        if self._db is not None:
            return
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            if not self._path.exists():
                _check.check_wal_orphan(self._path)
                _file.create(self._path)
        except OSError as err:
            raise unreadable(self._path, err) from err
        except sqlite3.Error as err:
            raise StoreError(f"{self._path} could not be created ({reason(err)})") from err
        _check.check_existing(self._path)
        self._db, self._vacuum_on_forget, self._wal = _file.connect(self._path)
        self._unchanged()  # what the file holds now is what this connection reads

    async def load_session(self, key: str) -> Session | None:
        """None also when the session's own row is damaged (a fresh session
        starts; its next commit replaces the row); a damaged turn is left out."""
        kept = self._kept().get(key)
        if kept is not None:  # a copy: the caller may change its turns
            return Session(key, kept.user, kept.started_at, kept.last_active, list(kept.turns))
        skipped = self._rows.skipped
        rows = self._rows_of("sessions", _SESSION, (key,), _SESSION_COLS)
        if not rows:
            return None
        _, user, started_at, last_active = rows[0]
        turns = self._rows_of("turns", _TURNS, (key,), "id role content")
        session = Session(key, user, started_at, last_active, [Turn(r, c) for _, r, c in turns])
        if self._rows.skipped == skipped:  # whole: what the file holds
            self._keep(session)
        return session

    async def save_session(self, session: Session | None, *, key: str) -> None:
        self._sessions.pop(key, None)
        with self._txn() as db:
            db.execute("DELETE FROM turns WHERE key = ?", (key,))
            if session is None:
                db.execute("DELETE FROM sessions WHERE key = ?", (key,))
            else:
                db.execute(_UPSERT_SESSION, _session_row(session, key))
                db.executemany(_INSERT_TURN, [(key, t.role, t.content) for t in session.turns])

    async def commit_exchange(self, exchange: Exchange) -> None:
        """One transaction: session, its new turns, ring entry (filed under
        `ring_user`), usage, each trim before its insert — or nothing if `ring_user` was
        forgotten at or after the session started. The inbox entry
        `exchange.inbox_key` is marked done in the same transaction, either way."""
        user, e, u = exchange.ring_user, exchange.entry, exchange.usage
        session, key = exchange.session, exchange.session.key
        added = session.turns[len(session.turns) - exchange.added_turns :]
        entry = (
            user,
            e.timestamp,
            e.user_message,
            e.assistant_summary,
            e.session_name,
            e.workdir,
            e.scope,
        )
        settled = exchange.settlement
        # Its stored turns become the session's own if it was kept (whole) or
        # all its turns are written now; anything else is read again. Kept on
        # a file another connection wrote since, it is dropped unserved: the
        # next read's `data_version` check finds that write.
        stored = self._sessions.pop(key, None)
        whole = stored is not None or exchange.added_turns >= len(session.turns)
        # The trim has nothing to delete when the kept session plus the new
        # turns is no longer than the session (checked against other writers).
        short = stored is not None and len(stored.turns) + len(added) <= len(session.turns)
        ring = self._rings.pop(user, None)
        written = False
        # The person's counters ride in the usage row when it is theirs (`_ledger`).
        fold = settled is not None and _ledger.folds(settled, user, exchange.day)
        with self._txn() as db:
            if exchange.inbox_key:
                _inbox.done(db, exchange.inbox_key, time.time())
            # Nothing more for a reply in flight during forget(); see core.ports.store.Memory.
            row = (key, session.user, session.started_at, session.last_active, user_hash(user))
            if db.execute(_UPSERT_SESSION_UNFORGOTTEN, row).rowcount:
                written = True
                if short and not self._unchanged():
                    # Another writer committed: `_version` moved past it, so
                    # nothing kept from before may be put back after this commit.
                    short = whole = False
                    ring = None
                if not short:  # before the insert, like the ring's trim below
                    db.execute(_TRIM_TURNS, (key, len(session.turns) - len(added)))
                db.executemany(_INSERT_TURN, [(key, t.role, t.content) for t in added])
                # Trims first: the inserts then reuse the pages they freed
                # (secure_delete zeroes a freed page, a WAL frame of its own).
                db.execute(_TRIM, (user, self._max - 1))
                db.execute(_INSERT_ENTRY, entry)
                if fold and settled is not None:
                    db.execute(
                        _ledger.ADD_USAGE_COUNTED,
                        (user, exchange.day, u.input_tokens, u.output_tokens, settled.tokens_in,
                         settled.tokens_out, 1, settled.nano_usd),
                    )  # fmt: skip
                else:
                    db.execute(_ADD_USAGE, (user, exchange.day, u.input_tokens, u.output_tokens))
            if settled is not None:  # counted even for a forgotten user: it was used
                rest = settled.accounts[1:] if written and fold else settled.accounts
                if rest:
                    _ledger.add(db, rest, settled.day, settled.month, settled.tally)
        if written and whole:
            self._keep(session)
        if written and ring is not None:  # as _TRIM left it: the newest `_max`
            ring.append(MemoryEntry(*entry[1:6], user, e.scope))
            self._rings[user] = ring[-self._max :]
        if settled is not None:
            self._counted_add(settled, settled.tokens_in + settled.tokens_out, settled.nano_usd)
            self._holds.release(settled)

    async def ring(self, user: str, *, since: float) -> list[MemoryEntry]:
        """Entries newer than `since`, oldest first; user "" (unknown owner) gets none."""
        if not user:
            return []
        whole = self._kept_ring(user)
        if whole is not None:
            return [entry for entry in whole if entry.timestamp > since]
        rows = self._rows_of("ring", _RING, (user, since, self._max), _RING_COLS)
        return [MemoryEntry(*row[1:]) for row in reversed(rows)]

    def _kept_ring(self, user: str) -> list[MemoryEntry] | None:
        """`user`'s whole ring, kept in memory like sessions; None when it is
        not whole: more rows than `max_entries` (a lowered limit, trimmed by
        the next commit) or a damaged one, which the filtered query serves."""
        if (whole := self._kept_rings().get(user)) is not None:
            return whole
        skipped = self._rows.skipped
        rows = self._rows_of("ring", _WHOLE_RING, (user, self._max + 1), _RING_COLS)
        if len(rows) > self._max or self._rows.skipped != skipped:
            return None
        if len(self._rings) >= _SESSIONS_KEPT:
            self._rings.clear()
        whole = self._rings[user] = [MemoryEntry(*row[1:]) for row in reversed(rows)]
        return whole

    async def forget(self, user: str) -> None:
        """Delete the user's rows, mark their pending inbox entries done and
        record a tombstone (pruning ones older than 7 days), then flush and
        truncate the WAL that still held the rows.

        Sessions have no index on `user` (it would cost a page write per commit),
        so this scans them; forget is rare and the scan takes milliseconds.
        """
        self._sessions.clear()
        self._rings.clear()
        with self._txn() as db:
            db.execute(
                "DELETE FROM turns WHERE key IN (SELECT key FROM sessions WHERE user = ?)", (user,)
            )
            db.execute(_ledger.KEEP_ON_FORGET, (user,))  # counted use stays
            for table in ("ring", "sessions", "usage"):
                db.execute(f"DELETE FROM {table} WHERE user = ?", (user,))
            now = time.time()
            db.execute("DELETE FROM forgotten WHERE at < ?", (now - TOMBSTONE_KEEP,))
            db.execute(_TOMBSTONE, (user_hash(user), now))
            for key in pending_of(self._pending(db), user, now):
                _inbox.done(db, key, now)
        try:
            if self._vacuum_on_forget:
                self._conn().execute("VACUUM")
            busy = self._marker().checkpoint(self._conn(), "TRUNCATE")
        except (sqlite3.Error, OSError) as err:
            raise StoreError(
                f"{self._path}: forget could not scrub the file ({reason(err)})"
            ) from chained(err)
        if busy:
            raise StoreError(f"{self._path}: forget could not truncate the WAL (busy); retry")

    async def usage(self, user: str, *, day: str) -> Usage:
        rows = self._rows_of("usage", _USAGE, (user, day), "day input_tokens output_tokens")
        return Usage(*rows[0][1:]) if rows else Usage()

    async def inbox_add(self, entry: InboxEntry) -> bool:
        prune = self._inbox_adds % _inbox.PRUNE_EVERY == 0
        with self._autocommit() as db:
            added = _inbox.add(db, entry, prune=prune)
        self._inbox_adds += 1
        return added

    async def inbox_add_many(self, entries: Sequence[InboxEntry]) -> list[bool]:
        """One transaction; it prunes when one of its adds is a `PRUNE_EVERY`-th."""
        if not entries:
            return []
        prune = -self._inbox_adds % _inbox.PRUNE_EVERY < len(entries)
        with self._txn() as db:
            added = _inbox.add_many(db, entries, prune=prune)
        self._inbox_adds += len(entries)
        return added

    async def inbox_progress(
        self, key: str, *, sent: tuple[str, ...], answer: str | None = None
    ) -> None:
        with self._autocommit() as db:
            _inbox.progress(db, key, sent, answer)

    async def inbox_done(self, key: str) -> None:
        with self._autocommit() as db:
            _inbox.done(db, key, time.time())

    async def inbox_pending(self) -> list[InboxEntry]:
        """A damaged entry (undecodable text, malformed JSON) is skipped and
        reported by its key; it stays in the table, unanswerable."""
        return self._pending(self._conn())

    async def inbox_pending_of(self, conversation: Conversation) -> list[InboxEntry]:
        """The conversation's pending entries, oldest first, by its index."""
        return self._pending(self._conn(), _inbox.PENDING_OF, (conversation.key,))

    def _pending(
        self, db: sqlite3.Connection, sql: str = _inbox.PENDING, args: tuple[str, ...] = ()
    ) -> list[InboxEntry]:
        try:
            rows = self._rows.read(db, sql, args, table="inbox", columns=_INBOX_COLS)
        except sqlite3.Error as err:
            raise StoreError(f"{self._path}: read failed ({reason(err)})") from chained(err)
        found = self._rows.parsed("inbox", rows, lambda row: _inbox.entries([row]))
        return [entry for one in found for entry in one]

    async def inbox_is_pending(self, key: str) -> bool:
        return bool(self._read(_inbox.IS_PENDING, (key,)))

    async def cursor_advance(self, platform: str, channel: str, last_id: int, *, at: float) -> None:
        with self._autocommit() as db:
            db.execute(_cursors.ADVANCE, (platform, channel, last_id, at))

    async def cursors(self, platform: str, *, since: float, limit: int) -> list[ChannelCursor]:
        with self._autocommit() as db:
            db.execute(_cursors.FORGET_QUIET, (platform, since))
        rows = self._rows_of("cursors", _cursors.RECENT, (platform, limit), _cursors.RECENT_COLUMNS)
        return [ChannelCursor(platform, channel, last, at) for _, channel, last, at in rows]

    async def ledger_reserve(self, hold: Hold) -> Verdict:
        """Read the sender's link and the counters, decide and record the hold
        in memory, with no await in between (`_ledger`); a refusal is
        counted in the file."""
        if hold.sender:
            group = self._group(hold.sender)
            relinked = moved(hold, group[0] if group else hold.sender)
            if relinked is not None:
                return relinked
        verdict = self._holds.reserve(hold, self._counts(hold))
        if not verdict.ok:
            keys = [a.key for a in hold.accounts]
            with self._txn() as db:
                _ledger.add(db, keys, hold.day, hold.month, Tally(refused=1))
            # No tokens, no cost: what is cached stays as it is.
        return verdict

    async def ledger_settle(self, settlement: Settlement) -> None:
        s = settlement
        with self._txn() as db:
            _ledger.add(db, s.accounts, s.day, s.month, s.tally)
        self._counted_add(s, s.tokens_in + s.tokens_out, s.nano_usd)
        self._holds.release(s)

    async def ledger_snapshots(self, hold: Hold) -> dict[str, Snapshot]:
        counted = self._ledger_read(lambda db: _ledger.counted(db, hold))
        return {a.key: self._holds.snapshot(a.key, hold, counted) for a in hold.accounts}

    def _counts(self, hold: Hold) -> Used:
        """The accounts' settled [tokens, nano-dollars] of the hold's day and
        month: from memory once read (this process writes every change of
        them, see `_counted_add`), else the file."""
        cache, day, month = self._counted, hold.day, hold.month
        found: dict[str, tuple[list[int], list[int]]] = {}
        for a in hold.accounts:
            settled_day, settled_month = cache.get((a.key, day)), cache.get((a.key, month))
            if settled_day is None or settled_month is None:
                break
            found[a.key] = (settled_day, settled_month)
        else:
            return found
        if len(cache) > _COUNTED_KEPT:
            cache.clear()
        read = self._ledger_read(lambda db: _ledger.counted(db, hold))
        for key, (counted_day, counted_month) in read.items():
            settled_day = cache[(key, day)] = [counted_day.tokens, counted_day.nano_usd]
            settled_month = cache[(key, month)] = [counted_month.tokens, counted_month.nano_usd]
            found[key] = (settled_day, settled_month)
        return found

    def _counted_add(self, s: Settlement, tokens: int, nano_usd: int) -> None:
        """After a settlement's commit: what is cached follows it (in place)."""
        cache = self._counted
        for key in s.accounts:
            for period in (s.day, s.month):
                cached = cache.get((key, period))
                if cached is not None:
                    cached[0] += tokens
                    cached[1] += nano_usd

    def _ledger_read(self, read: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return read(self._conn())
        except sqlite3.Error as err:
            raise StoreError(f"{self._path}: read failed ({reason(err)})") from chained(err)

    async def ledger_rows(self, *, since_day: str) -> list[LedgerRow]:
        try:
            return _ledger.rows(self._conn(), since_day=since_day)
        except sqlite3.Error as err:
            raise StoreError(f"{self._path}: read failed ({reason(err)})") from chained(err)

    async def link_offer(self, user: str, code_hash: str, *, expires_at: float) -> None:
        with self._txn() as db:
            _links.offer(db, user, code_hash, expires_at, expires_at - CODE_TTL)

    async def link_take(self, code_hash: str, *, now: float) -> str | None:
        with self._txn() as db:
            return _links.take(db, code_hash, now)

    async def link_attempt(self, user: str, *, now: float, failed: bool) -> float | None:
        with self._txn() as db:
            return _links.attempt(db, user, now, failed)

    async def link_join(self, first: str, second: str) -> str:
        self._groups.clear()
        with self._txn() as db:
            return _links.join(db, first, second)

    async def link_split(self, user: str) -> bool:
        self._groups.clear()
        with self._txn() as db:
            return _links.split(db, user)

    async def link_group(self, user: str) -> tuple[str, ...]:
        return self._group(user)

    def _group(self, user: str) -> tuple[str, ...]:
        """Asked for every limited message: answered from memory once read (links
        change only through this store's join and split, which drop what is kept)."""
        group = self._groups.get(user)
        if group is None:
            group = self._ledger_read(lambda db: _links.group(db, user))
            if len(self._groups) > _COUNTED_KEPT:
                self._groups.clear()
            self._groups[user] = group
        return group

    async def aclose(self) -> None:
        """Checkpoint and close; the `-wal` and `-shm` files are removed. Idempotent."""
        db, self._db = self._db, None
        wal, self._wal = self._wal, None
        self._sessions.clear()
        self._rings.clear()
        if db is not None and wal is not None:
            try:
                wal.checkpoint(db, "TRUNCATE")
            except (sqlite3.Error, OSError) as err:
                raise StoreError(
                    f"{self._path}: final checkpoint failed ({reason(err)})"
                ) from chained(err)
            finally:
                wal.close()
                db.close()

    def _kept(self) -> dict[str, Session]:
        """The sessions kept in memory, first emptied if another connection
        committed since they were read."""
        self._unchanged()
        return self._sessions

    def _kept_rings(self) -> dict[str, list[MemoryEntry]]:
        """The rings kept in memory, likewise."""
        self._unchanged()
        return self._rings

    def _unchanged(self) -> bool:
        """True when no other connection (another process, an admin command)
        committed to the file since the last call: SQLite's `data_version`
        moves only then, not for this connection's own commits. Else the kept
        sessions are dropped."""
        version = self._read(_DATA_VERSION, ())[0][0]
        if version == self._version:
            return True
        self._sessions.clear()
        self._rings.clear()
        self._version = version
        return False

    def _keep(self, session: Session) -> None:
        if len(self._sessions) >= _SESSIONS_KEPT:
            self._sessions.clear()
        # As a read gives it back: a stored turn keeps no media parts.
        turns = [t if not t.parts else Turn(t.role, t.content) for t in session.turns]
        self._sessions[session.key] = Session(
            session.key, session.user, session.started_at, session.last_active, turns
        )

    def _read(self, sql: str, args: tuple[object, ...]) -> list[tuple[Any, ...]]:
        try:
            return self._conn().execute(sql, args).fetchall()
        except sqlite3.Error as err:
            raise StoreError(f"{self._path}: read failed ({reason(err)})") from chained(err)

    def _rows_of(
        self, table: str, sql: str, args: tuple[object, ...], columns: str
    ) -> list[tuple[Any, ...]]:
        """`sql`'s rows that decode, damaged ones skipped (see `_rows`)."""
        try:
            # Every such read selects one owner's rows, named by its first argument.
            owner = args[0] if args else None
            return self._rows.read(
                self._conn(), sql, args, table=table, columns=columns, owner=owner
            )
        except sqlite3.Error as err:
            raise StoreError(f"{self._path}: read failed ({reason(err)})") from chained(err)

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError(f"{self._path} is not open")
        return self._db

    def _marker(self) -> _wal.WalMarker:
        if self._wal is None:
            raise StoreError(f"{self._path} is not open")
        return self._wal

    def _autocommit(self) -> _Writing:
        """For writes that are one statement each: each is its own transaction."""
        return _Writing(self, begin=False)

    def _txn(self) -> _Writing:
        return _Writing(self, begin=True)

    def _write_failed(self, err: sqlite3.Error | OSError) -> StoreError:
        return StoreError(f"{self._path}: write failed ({reason(err)})")


class _Writing:
    """`with store._txn() as db` (BEGIN IMMEDIATE ... COMMIT) or `_autocommit`
    (statements that are their own transactions); either way the WAL marker
    is told after the write. A sqlite3 or OS error becomes `StoreError`, and
    an unfinished transaction is rolled back whatever ended it. A class, not
    a generator: it is on every message's path, three times."""

    __slots__ = ("_begin", "_db", "_store")

    def __init__(self, store: SqliteStore, *, begin: bool) -> None:
        self._store, self._begin = store, begin
        self._db = store._conn()

    def __enter__(self) -> sqlite3.Connection:
        if self._begin:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except (sqlite3.Error, OSError) as err:
                raise self._store._write_failed(err) from chained(err)
        return self._db

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: object
    ) -> None:
        db = self._db
        if err is None:
            try:
                if self._begin:
                    db.execute("COMMIT")
                self._store._marker().wrote(db)
                return
            except BaseException as failed:
                err = failed
                self._rollback()
                if not isinstance(failed, sqlite3.Error | OSError):
                    raise
        else:
            self._rollback()
        if isinstance(err, sqlite3.Error | OSError):
            raise self._store._write_failed(err) from chained(err)

    def _rollback(self) -> None:
        if self._begin and self._db.in_transaction:
            self._db.execute("ROLLBACK")


def _session_row(s: Session, key: str) -> tuple[str, str, float, float]:
    return (key, s.user, s.started_at, s.last_active)
