"""Vetting an existing SQLite file without ever writing to it.

`check_existing` reads the header, vets a `-wal` beside it byte by byte
(`wal_problem`), then runs `PRAGMA quick_check` (`integrity_check` when a WAL
will be replayed) and a column-type scan on a read-only connection. When no
`-wal` file is present it opens with `immutable=1`, so SQLite creates no
`-wal`/`-shm` beside a file we may be about to reject; with a hot `-wal` (a
killed process) it must read the WAL, which needs a `-shm`; one it had to
create is removed again. The main file and `-wal` are never written.

What a `-wal` must be (SQLite keeps no link between a database and its WAL,
so it replays whatever WAL lies beside the file; these checks refuse what
SQLite's own WAL cannot look like, before SQLite sees it):

* a 32-byte header with the WAL magic, format 3007000, the database's page
  size and a valid header checksum;
* a first frame carrying the header's salts. One exception is SQLite's own: a
  writer killed between restarting the WAL (salt-1 + 1, new header) and
  writing its first frame leaves the previous generation's frames, salt-1
  one lower, which SQLite ignores; they were all checkpointed already.

A first frame whose salts match but whose checksum does not is a torn write
of our own (SQLite ignores the WAL); it is accepted. A `-shm` is never
vetted: it is SQLite's rebuildable index of the WAL (a stale or foreign one
is detected by its checksums and rebuilt), so it decides nothing. What passes
these checks but is still not ours (a WAL of another chatbridge store with
the same page layout, or an older WAL of this one) cannot be told apart at
file level; its replay must then pass `integrity_check`, hold our tables and
schema version, and keep the store id and epoch the file itself holds
(`_wal`).
"""

from __future__ import annotations

import os
import sqlite3
import struct
from pathlib import Path

from chatbridge.core.ports.store import StoreCorrupt, StoreError
from chatbridge.stores._codec import corrupt, unreadable
from chatbridge.stores.sqlite._wal import stale_problem

SCHEMA_VERSION = 3  # bump with a migration in _file; older builds then refuse the file
# Versions this build opens, each migrated at connect: 1 (before the usage
# row carried the limit counters) to 2, 2 (ring and turns as rowid tables
# with an index, `_layout`) to 3. An older build refuses a 2, since it would
# not see the counters there and let a budget be overshot, and a 3, whose
# ring rows it could not insert.
READABLE_VERSIONS = frozenset({"1", "2", str(SCHEMA_VERSION)})
_MAGIC = b"SQLite format 3\x00"
_TABLES = {"meta", "ring", "sessions", "usage"}
_WAL_MAGIC = {0x377F0682: "<", 0x377F0683: ">"}  # checksum words little/big-endian
_WAL_VERSION = 3007000
_WAL_HEADER, _FRAME_HEADER = 32, 24

# The storage class each column must hold. REAL columns read back as 'real'
# even for integral values (affinity); NULL only where the schema allows it.
TEXT, REAL, INT = ("text",), ("real", "integer"), ("integer",)
COLUMNS: dict[str, dict[str, tuple[str, ...]]] = {
    "meta": {"key": TEXT, "value": TEXT},
    "ring": {
        "user": TEXT, "timestamp": REAL, "user_message": TEXT, "assistant_summary": TEXT,
        "session_name": TEXT, "workdir": TEXT, "scope": TEXT,
    },
    "sessions": {"key": TEXT, "user": TEXT, "started_at": REAL, "last_active": REAL},
    "turns": {"key": TEXT, "role": TEXT, "content": TEXT},
    "usage": {"user": TEXT, "day": TEXT, "input_tokens": INT, "output_tokens": INT},
    "forgotten": {"user_hash": TEXT, "at": REAL},
    "inbox": {
        "key": TEXT, "received_at": REAL, "message": (*TEXT, "null"),
        "answer": (*TEXT, "null"), "sent": (*TEXT, "null"), "done_at": (*REAL, "null"),
    },
}  # fmt: skip
_JSON_COLUMNS = {"inbox": ("message", "sent")}


def check_existing(path: Path) -> None:
    """Raise unless `path` is a chatbridge store of this schema. Never writes `path`.

    Raises `StoreError` when the file cannot be opened for reading and writing
    (permissions), `StoreCorrupt` when it is not a healthy store of ours or the
    `-wal` beside it is not its own.
    """
    try:
        with path.open("rb") as f:
            header = f.read(100)
        size = path.stat().st_size
        if not os.access(path, os.R_OK | os.W_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as err:
        raise unreadable(path, err) from err
    if size == 0:
        raise corrupt(path, "SQLite", "file is empty")
    if len(header) < 100 or not header.startswith(_MAGIC):
        raise corrupt(path, "SQLite", "file is not a database")
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1) or size % page:
        raise corrupt(path, "SQLite", "file is truncated or its header is damaged")
    wal = Path(f"{path}-wal")
    try:
        hot_wal = wal.exists() and wal.stat().st_size > 0
        problem = wal_problem(wal, page) if hot_wal else None
    except OSError as err:
        raise unreadable(wal, err) from err
    if problem:
        raise StoreCorrupt(
            f"{wal} does not belong to this store ({problem}); both files were left "
            "untouched — move the -wal file aside (or restore its own database) and start again"
        )
    # The header's page count is trustworthy only when its valid-for counter
    # matches the change counter, and the file alone is the whole truth only
    # when no WAL holds pages a killed checkpoint had not copied yet.
    if not hot_wal and header[24:28] == header[92:96]:
        if int.from_bytes(header[28:32], "big") * page > size:
            raise corrupt(path, "SQLite", "file is truncated")
    _check_contents(path, hot_wal)


def wal_problem(wal: Path, page: int) -> str | None:
    """Why the non-empty `wal` cannot be the WAL of a database with pages of
    `page` bytes, in a few words; None if it can. Reads at most one frame."""
    with wal.open("rb") as f:
        head = f.read(_WAL_HEADER + _FRAME_HEADER + page)
    if len(head) < _WAL_HEADER:
        return "too short for a WAL header"
    magic, version, wal_page, _seq, salt1, salt2, sum1, sum2 = struct.unpack(">8I", head[:32])
    order = _WAL_MAGIC.get(magic)
    if order is None:
        return "not a SQLite WAL file"
    if version != _WAL_VERSION:
        return f"unknown WAL format {version}"
    if wal_page != page:
        return f"its pages are {wal_page} bytes, the database's {page}"
    s1, s2 = _checksum(order, head[:24], 0, 0)
    if (s1, s2) != (sum1, sum2):
        return "its header checksum is wrong"
    frame = head[_WAL_HEADER:]
    if len(frame) < _FRAME_HEADER + page:
        return None  # a header alone (or a torn first frame): SQLite replays nothing
    f_salt1, f_salt2 = struct.unpack(">2I", frame[8:16])
    if (f_salt1, f_salt2) != (salt1, salt2):
        if f_salt1 == (salt1 - 1) % 2**32:
            return None  # our own restart, killed before its first frame (see above)
        return "its first frame is from another WAL"
    return None  # a checksum mismatch here is a torn write SQLite ignores


def _checksum(order: str, data: bytes, s1: int, s2: int) -> tuple[int, int]:
    """SQLite's WAL checksum (two running 32-bit sums over pairs of words)."""
    words = struct.unpack(f"{order}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s1 = (s1 + words[i] + s2) & 0xFFFFFFFF
        s2 = (s2 + words[i + 1] + s1) & 0xFFFFFFFF
    return s1, s2


def _check_contents(path: Path, hot_wal: bool) -> None:
    uri = path.resolve().as_uri() + ("?mode=ro" if hot_wal else "?mode=ro&immutable=1")
    shm = Path(f"{path}-shm")
    had_shm = shm.exists()
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=0.5)
        try:
            # A replayed WAL gets the full check: a WAL of another store with a
            # similar layout breaks index/table agreement long before b-tree shape.
            pragma = "integrity_check(1)" if hot_wal else "quick_check(1)"
            check = db.execute(f"PRAGMA {pragma}").fetchall()
            if check != [("ok",)]:
                # The report is multi-line ("*** in database main ***\nPage 3: ...");
                # one sentence wants its first real finding. SQLite's findings
                # name pages, tables and rowids, never a column's value.
                lines = [ln for row in check for ln in str(row[0]).splitlines()]
                found = next((ln for ln in lines if not ln.startswith("***")), "unknown")
                raise corrupt(path, "SQLite", f"integrity check failed: {found.strip()}")
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
            if not _TABLES <= names:
                raise corrupt(path, "SQLite", "no chatbridge tables")
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None or row[0] not in READABLE_VERSIONS:
                found = "none" if row is None else str(row[0])[:12]
                reason = f"schema version {found}, this build reads 1 to {SCHEMA_VERSION}"
                raise corrupt(path, "SQLite", reason)
            stale = _stale_wal(uri, db) if hot_wal else None
            damaged = _damaged_column(db, names)
        finally:
            db.close()
            if not had_shm:  # a read-only connection leaves the -shm it had to create
                shm.unlink(missing_ok=True)
    except sqlite3.DatabaseError as err:
        raise (in_use(path) if is_locked(err) else corrupt(path, "SQLite", str(err))) from err
    if stale:
        raise StoreCorrupt(
            f"{path}-wal does not belong to this store ({stale}); both files were left "
            "untouched — move the -wal file aside (or restore its own database) and start again"
        )
    if damaged:
        raise damaged_row(path, damaged)


def _stale_wal(uri: str, view: sqlite3.Connection) -> str | None:
    """`_wal.stale_problem` of the WAL replayed in `view`."""
    alone = sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None)
    try:
        return stale_problem(view, alone)
    except sqlite3.DatabaseError:
        # The file alone may be mid-checkpoint (a process killed while copying
        # pages back); only its WAL makes it whole, so the WAL is not stale.
        return None
    finally:
        alone.close()


def _damaged_column(db: sqlite3.Connection, names: set[str]) -> str | None:
    """What is wrong with the first damaged column ("table.column holds ..."),
    else None. One scan per table (`typeof` reads no value; ~70 ms for 100k
    ring rows), a second per column only once one is known to be damaged."""
    for table, columns in COLUMNS.items():
        if table not in names:
            continue  # forgotten and inbox are created at connect in older files
        tests = [
            (col, f"typeof({col}) NOT IN ({', '.join(map(repr, kinds))})", "a wrong type")
            for col, kinds in columns.items()
        ]
        tests += [
            (col, f"({col} IS NOT NULL AND NOT json_valid({col}))", "malformed JSON")
            for col in _JSON_COLUMNS.get(table, ())
        ]
        where = " OR ".join(test for _, test, _ in tests)
        if not db.execute(f"SELECT EXISTS(SELECT 1 FROM {table} WHERE {where})").fetchone()[0]:
            continue
        for col, test, kind in tests:
            bad = db.execute(f"SELECT count(*) FROM {table} WHERE {test}").fetchone()[0]
            if bad:
                return f"{table}.{col} holds {kind} in {bad} row(s)"
    return None


def damaged_row(path: Path, what: str) -> StoreCorrupt:
    """A stored value of the wrong shape: names table and column, never the value."""
    return corrupt(path, "SQLite", f"damaged rows: {what}")


def check_wal_orphan(path: Path) -> None:
    """A `-wal` without its database would be replayed into a new one; refuse."""
    wal = Path(f"{path}-wal")
    if wal.exists():
        raise StoreError(
            f"{wal} exists but {path} does not; it was left untouched — "
            "restore the database or move the -wal file aside"
        )


def is_locked(err: sqlite3.Error) -> bool:
    return isinstance(err, sqlite3.OperationalError) and any(
        word in str(err) for word in ("locked", "busy")
    )


def in_use(path: Path) -> StoreError:
    return StoreError(f"{path} is in use by another process; stop it or use another file")
