"""Creating a fresh SQLite store and connecting to a vetted one."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from chatbridge.core.ports.store import StoreError
from chatbridge.stores._codec import fsync_dir
from chatbridge.stores.sqlite._check import SCHEMA_VERSION, in_use, is_locked
from chatbridge.stores.sqlite._cursors import CURSORS_MARKER, CURSORS_TABLE
from chatbridge.stores.sqlite._inbox import (
    CONVERSATION_MARKER,
    CONVERSATION_MIGRATION,
    INBOX_MARKER,
    INBOX_TABLE,
)
from chatbridge.stores.sqlite._layout import RING_TABLE, TURNS_TABLE
from chatbridge.stores.sqlite._layout import migrate as migrate_layout
from chatbridge.stores.sqlite._ledger import LEDGER_MARKER, LEDGER_TABLES
from chatbridge.stores.sqlite._ledger import migrate as migrate_usage
from chatbridge.stores.sqlite._links import LINKS_MARKER, LINKS_TABLES
from chatbridge.stores.sqlite._wal import WalMarker

# Tombstones of forgotten ring owners (SHA-256 of the user ID, wall-clock time
# of the forget), so a reply in flight during `forget` cannot write back.
# Added after files were first made with schema 1, hence also created at connect.
FORGOTTEN_TABLE = """
CREATE TABLE IF NOT EXISTS forgotten(user_hash TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID;
"""
_SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');
{RING_TABLE}CREATE TABLE sessions(
    key TEXT PRIMARY KEY, user TEXT NOT NULL, started_at REAL NOT NULL,
    last_active REAL NOT NULL);
{TURNS_TABLE}CREATE TABLE usage(
    user TEXT NOT NULL, day TEXT NOT NULL, input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL, ledger_tokens_in INTEGER NOT NULL DEFAULT 0,
    ledger_tokens_out INTEGER NOT NULL DEFAULT 0, ledger_requests INTEGER NOT NULL DEFAULT 0,
    ledger_nano_usd INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(user, day)) WITHOUT ROWID;
{FORGOTTEN_TABLE}{INBOX_TABLE}{CURSORS_TABLE}{LEDGER_TABLES}{LINKS_TABLES}"""


def create(path: Path) -> None:
    """Build a fresh store beside `path` and link it into place.

    Building under a temporary name means `path` never exists half-made, so an
    empty or schema-less file there is always someone else's and is refused.
    Mode 0600: the ring holds private messages.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _build(tmp)
        try:
            os.link(tmp, path)  # unlike rename, never clobbers a store another process made
        except FileExistsError:
            pass  # lost a race; the winner's file is vetted like any other
        except OSError:
            os.replace(tmp, path)  # filesystems without hard links
    finally:
        # Also after a failed build (a full disk): nothing half-made stays behind.
        for leftover in (tmp, *(tmp.with_name(tmp.name + s) for s in ("-journal", "-wal", "-shm"))):
            leftover.unlink(missing_ok=True)
    fsync_dir(path.parent)


def _build(tmp: Path) -> None:
    """The schema in a fresh file at `tmp`, in WAL mode, mode 0600, synced."""
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


def connect(path: Path) -> tuple[sqlite3.Connection, bool, WalMarker]:
    """Open `path` (already vetted) for writing; returns the connection,
    whether `forget` must VACUUM because this SQLite build cannot zero deleted
    rows, and the WAL marker every write and checkpoint must go through.
    """
    db = sqlite3.connect(path, isolation_level=None)
    try:
        # Normal (shared) locking: `chatbridge memory show|forget` must work from
        # another shell while `chatbridge run` serves, and WAL lets readers and
        # the one writer proceed side by side; writers wait up to 5 s.
        db.execute("PRAGMA busy_timeout = 5000")
        if db.execute("PRAGMA journal_mode = WAL").fetchone() != ("wal",):
            raise sqlite3.OperationalError("WAL mode unavailable")
        db.execute("PRAGMA synchronous = NORMAL")
        # The store runs every checkpoint itself, each after an epoch bump
        # (see _wal); SQLite's own would not bump it.
        db.execute("PRAGMA wal_autocheckpoint = 0")
        needs_vacuum = db.execute("PRAGMA secure_delete = ON").fetchone() != (1,)
        db.execute("SELECT count(*) FROM meta").fetchone()
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'forgotten'").fetchone():
            db.execute(FORGOTTEN_TABLE)  # a file made before tombstones existed
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (INBOX_MARKER,)).fetchone():
            db.executescript(f"BEGIN IMMEDIATE; {INBOX_TABLE} COMMIT;")  # made before the inbox
        if not db.execute(
            "SELECT 1 FROM sqlite_master WHERE name = ?", (CONVERSATION_MARKER,)
        ).fetchone():  # an inbox made before its per-conversation index
            db.executescript(f"BEGIN IMMEDIATE; {CONVERSATION_MIGRATION} COMMIT;")
        if not db.execute(
            "SELECT 1 FROM sqlite_master WHERE name = ?", (CURSORS_MARKER,)
        ).fetchone():
            db.executescript(f"BEGIN IMMEDIATE; {CURSORS_TABLE} COMMIT;")  # before cursors
        if not db.execute(
            "SELECT 1 FROM sqlite_master WHERE name = ?", (LEDGER_MARKER,)
        ).fetchone():
            db.executescript(f"BEGIN IMMEDIATE; {LEDGER_TABLES} COMMIT;")  # before limits
        migrate_usage(db)  # before the usage row carried the ledger's counters
        migrate_layout(db)  # before ring and turns were clustered by owner
        if not db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (LINKS_MARKER,)).fetchone():
            db.executescript(f"BEGIN IMMEDIATE; {LINKS_TABLES} COMMIT;")  # before linking
        marker = WalMarker(path)
        marker.attach(db)
    except (sqlite3.Error, OSError) as err:
        db.close()
        if isinstance(err, sqlite3.Error) and is_locked(err):
            raise in_use(path) from err
        raise StoreError(f"{path} could not be opened ({err})") from err
    return db, needs_vacuum, marker
