"""How a migration at connect runs: only when needed, decided again under the
write lock (two processes may open an old file at once), in one transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

__all__ = ["migrate_once", "schema_version"]


def migrate_once(
    db: sqlite3.Connection,
    needed: Callable[[sqlite3.Connection], bool],
    apply: Callable[[sqlite3.Connection], None],
) -> None:
    """`apply` in one BEGIN IMMEDIATE transaction if `needed`, asked first
    without the lock (the common case: nothing to do) and again under it."""
    if not needed(db):
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        if needed(db):
            apply(db)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def schema_version(db: sqlite3.Connection) -> str | None:
    """The file's `meta.schema_version`, None if it has none."""
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return None if row is None else str(row[0])
