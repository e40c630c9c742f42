"""Vetting an existing SQLite file without ever writing to it.

`check_existing` reads the header and runs `PRAGMA quick_check` on a read-only
connection. When no `-wal` file is present it opens with `immutable=1`, so
SQLite creates no `-wal`/`-shm` beside a file we may be about to reject; with a
hot `-wal` (a killed process) it must read the WAL, which needs a `-shm`; one
it had to create is removed again. The main file and `-wal` are never written.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from chatbridge.core.store._codec import corrupt, unreadable
from chatbridge.core.store.base import StoreError

SCHEMA_VERSION = 1  # bump with a migration in _sqlite_file; older builds then refuse the file
_MAGIC = b"SQLite format 3\x00"
_TABLES = {"meta", "ring", "sessions", "usage"}


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
    shm = Path(f"{path}-shm")
    had_shm = shm.exists()
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=0.5)
        try:
            check = db.execute("PRAGMA quick_check").fetchall()
            if check != [("ok",)]:
                # The report is multi-line ("*** in database main ***\nPage 3: ...");
                # one sentence wants its first real finding.
                lines = [ln for row in check for ln in str(row[0]).splitlines()]
                found = next((ln for ln in lines if not ln.startswith("***")), "unknown")
                raise corrupt(path, "SQLite", f"integrity check failed: {found.strip()}")
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
            if not _TABLES <= names:
                raise corrupt(path, "SQLite", "no chatbridge tables")
            row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        finally:
            db.close()
            if not had_shm:  # a read-only connection leaves the -shm it had to create
                shm.unlink(missing_ok=True)
    except sqlite3.DatabaseError as err:
        raise (in_use(path) if is_locked(err) else corrupt(path, "SQLite", str(err))) from err
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


def is_locked(err: sqlite3.Error) -> bool:
    return isinstance(err, sqlite3.OperationalError) and any(
        word in str(err) for word in ("locked", "busy")
    )


def in_use(path: Path) -> StoreError:
    return StoreError(f"{path} is in use by another process; stop it or use another file")
