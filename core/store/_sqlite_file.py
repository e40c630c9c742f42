"""Creating and vetting the SQLite file without ever writing to an existing one.

`check_existing` reads the header and runs `PRAGMA quick_check` on a read-only
connection. When no `-wal` file is present it opens with `immutable=1`, so
SQLite creates no `-wal`/`-shm` beside a file we may be about to reject; with a
hot `-wal` (a killed process) it must read the WAL, which only touches `-shm`.
The main file is byte-identical after a failed check either way.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from core.store._codec import corrupt, fsync_dir, unreadable
from core.store.base import StoreError

SCHEMA_VERSION = 1
_MAGIC = b"SQLite format 3\x00"
_TABLES = {"meta", "ring", "sessions", "usage"}
_SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');
CREATE TABLE ring(
    id INTEGER PRIMARY KEY, user TEXT NOT NULL, timestamp REAL NOT NULL,
    user_message TEXT NOT NULL, assistant_summary TEXT NOT NULL,
    session_name TEXT NOT NULL, workdir TEXT NOT NULL, scope TEXT NOT NULL);
CREATE INDEX ring_user_id ON ring(user, id);
CREATE TABLE sessions(
    key TEXT PRIMARY KEY, user TEXT NOT NULL, started_at REAL NOT NULL,
    last_active REAL NOT NULL, turns TEXT NOT NULL);
CREATE INDEX sessions_user ON sessions(user);
CREATE TABLE usage(
    user TEXT NOT NULL, day TEXT NOT NULL, input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL, PRIMARY KEY(user, day)) WITHOUT ROWID;
"""


def create(path: Path) -> None:
    """Build a fresh store beside `path` and link it into place.

    Building under a temporary name means `path` never exists half-made, so an
    empty or schema-less file there is always someone else's and is refused.
    Mode 0600: the ring holds private messages.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    db = sqlite3.connect(tmp, isolation_level=None)
    try:
        db.executescript(f"BEGIN; {_SCHEMA} COMMIT;")
        db.execute("PRAGMA journal_mode=WAL")  # persistent, recorded in the header
    finally:
        db.close()
    os.chmod(tmp, 0o600)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # unlike rename, never clobbers a store another process made
    except FileExistsError:
        pass  # lost a race; the winner's file is vetted like any other
    except OSError:
        os.replace(tmp, path)  # filesystems without hard links
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def check_existing(path: Path) -> None:
    """Raise unless `path` is a chatbridge store of this schema. Never writes `path`.

    Raises `StoreError` when the file cannot be opened for reading and writing
    (permissions), `StoreCorrupt` when it is not a healthy store of ours.
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
    hot_wal = wal.exists() and wal.stat().st_size > 0
    # The header's page count is trustworthy only when its valid-for counter
    # matches the change counter, and the file alone is the whole truth only
    # when no WAL holds pages a killed checkpoint had not copied yet.
    if not hot_wal and header[24:28] == header[92:96]:
        if int.from_bytes(header[28:32], "big") * page > size:
            raise corrupt(path, "SQLite", "file is truncated")
    _check_contents(path, hot_wal)


def _check_contents(path: Path, hot_wal: bool) -> None:
    uri = path.resolve().as_uri() + ("?mode=ro" if hot_wal else "?mode=ro&immutable=1")
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            check = db.execute("PRAGMA quick_check").fetchall()
            if check != [("ok",)]:
                raise corrupt(path, "SQLite", f"integrity check failed: {check[0][0]}")
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
            if not _TABLES <= names:
                raise corrupt(path, "SQLite", "no chatbridge tables")
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError as err:
        raise corrupt(path, "SQLite", str(err)) from err
    if row is None or row[0] != str(SCHEMA_VERSION):
        found = "none" if row is None else row[0]
        raise corrupt(path, "SQLite", f"schema version {found}, this build reads {SCHEMA_VERSION}")


def check_wal_orphan(path: Path) -> None:
    """A `-wal` without its database would be replayed into a new one; refuse."""
    wal = Path(f"{path}-wal")
    if wal.exists():
        raise StoreError(
            f"{wal} exists but {path} does not; it was left untouched — "
            "restore the database or move the -wal file aside"
        )
