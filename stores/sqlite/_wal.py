"""Telling an old `-wal` of the store's own from its live one.

SQLite keeps no link between a database and its WAL: it replays whatever
valid WAL lies beside the file. A copy of the store's own earlier `-wal`
(a restored backup, a file copied back by hand) passes every check of the
file format, and its replay silently puts older pages over newer ones: the
exchanges written since disappear, and `open()` would succeed.

So the store keeps its own link, two rows in `meta`:

* `store_id`, random, made with the file: a WAL of another chatbridge store
  carries a different one;
* `epoch`, an integer that only grows, bumped (one small write)
  1. right after a write that opened a new WAL generation (SQLite restarted
     the WAL: new salts in its header), so every generation holds a frame
     of `meta` with its own epoch; and
  2. right before every checkpoint. chatbridge runs all of them:
     `wal_autocheckpoint` is 0, and the store checkpoints every
     `CHECKPOINT_EVERY` writes, in `forget` and when it closes.

After a checkpoint the database file therefore holds a higher epoch than
any frame of that WAL written before the checkpoint's bump, while a live
WAL (a killed process's) never holds a lower one than the file. `open()`
reads both rows through the WAL (what SQLite would replay) and from the
file alone, and refuses a WAL that would lower the epoch or change the
store id (`stale_problem`).

Not detected: a copy taken in the microseconds between a generation's first
write and its bump, a WAL written by a build that kept no epoch, and WALs
of other programs writing the file (they keep no epoch either).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

__all__ = ["CHECKPOINT_EVERY", "WalMarker", "stale_problem"]

# Writes (three per answered message): a WAL of about 4 MB, near SQLite's own
# default of 1000 pages. A small WAL is rewritten in place once checkpointed;
# 2000 writes let it grow to ~45 MB first, and growing it cost more system
# time per message than the extra checkpoints (benchmarked in BENCHMARKS.md).
CHECKPOINT_EVERY = 150
_NEW_ID = "INSERT OR IGNORE INTO meta(key, value) VALUES ('store_id', lower(hex(randomblob(16))))"
_BUMP = """
INSERT INTO meta(key, value) VALUES ('epoch', '1')
ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"""
_READ = "SELECT key, value FROM meta WHERE key IN ('store_id', 'epoch')"


class WalMarker:
    """Keeps rules 1 and 2 above for one write connection of the store.

    `attach` runs at connect (it is the connection's first write), `wrote`
    after every write transaction, `checkpoint` instead of any
    `PRAGMA wal_checkpoint`. Costs one `pread` of the WAL header per write.
    """

    def __init__(self, path: Path) -> None:
        self._wal = Path(f"{path}-wal")
        self._fd: int | None = None
        self._salts = b""
        self._writes = 0

    def attach(self, db: sqlite3.Connection) -> None:
        """Give an older file its store id, bump the epoch, watch the WAL."""
        db.execute(_NEW_ID)
        db.execute(_BUMP)
        self._fd = os.open(self._wal, os.O_RDONLY)  # exists now: the bump wrote it
        self._salts = self._header_salts()

    def wrote(self, db: sqlite3.Connection) -> None:
        """After a committed write: mark a new generation, checkpoint when due.

        Never raises: the write it follows is committed, and a bump or
        checkpoint that failed (a full disk) is tried again after the next
        write.
        """
        self._writes += 1
        try:
            salts = self._header_salts()
            if salts != self._salts:
                db.execute(_BUMP)
                self._salts = salts
            if self._writes >= CHECKPOINT_EVERY:
                self.checkpoint(db, "PASSIVE")
                self._writes = 0
        except (sqlite3.Error, OSError):
            pass

    def checkpoint(self, db: sqlite3.Connection, mode: str) -> int:
        """Bump, then `PRAGMA wal_checkpoint(mode)`; returns SQLite's busy flag."""
        db.execute(_BUMP)
        busy = int(db.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()[0])
        self._salts = self._header_salts()
        return busy

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _header_salts(self) -> bytes:
        # The WAL file keeps its inode while a connection is open (a TRUNCATE
        # checkpoint empties it; SQLite deletes it only after the last close).
        return b"" if self._fd is None else os.pread(self._fd, 8, 16)


def stale_problem(view: sqlite3.Connection, file_alone: sqlite3.Connection) -> str | None:
    """Why the WAL replayed in `view` is not the live WAL of the database
    read in `file_alone` (`immutable=1`: the file without its WAL), in a few
    words; None when it may be. Files of builds before the marker have no
    rows and pass."""
    seen, stored = dict(view.execute(_READ).fetchall()), dict(file_alone.execute(_READ).fetchall())
    if "store_id" in seen and "store_id" in stored and seen["store_id"] != stored["store_id"]:
        return "it is the WAL of another chatbridge store"
    if "epoch" in stored and _int(seen.get("epoch")) < _int(stored["epoch"]):
        return "it is older than the database's last checkpoint; its replay would lose newer data"
    return None


def _int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return -1
