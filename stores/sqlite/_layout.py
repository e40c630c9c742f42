"""Schema 3: a user's ring and a session's turns stored together (WITHOUT ROWID).

Up to schema 2 both were rowid tables with an index on (owner, id): every
commit wrote the table's pages and the index's, and a conversation's rows sat
wherever the global rowid put them, among everyone else's. Clustered on
(owner, id) the rows are the index: one commit appends to, and trims, the
pages of its own conversation, and no index page is written (two WAL frames
fewer per commit, measured in BENCHMARKS.md). `id` is then numbered per owner
(`max(id) + 1` of that owner, one seek), still oldest first.

`migrate` rebuilds a schema-2 file's two tables in one transaction at open
(rows and ids kept) and records version 3, which older builds refuse: they
would insert ring rows without an `id`.
"""

from __future__ import annotations

import sqlite3

from chatbridge.stores.sqlite._migrate import migrate_once, schema_version

VERSION = "3"
RING_TABLE = """
CREATE TABLE ring(
    user TEXT NOT NULL, id INTEGER NOT NULL, timestamp REAL NOT NULL,
    user_message TEXT NOT NULL, assistant_summary TEXT NOT NULL,
    session_name TEXT NOT NULL, workdir TEXT NOT NULL, scope TEXT NOT NULL,
    PRIMARY KEY(user, id)) WITHOUT ROWID;
"""
TURNS_TABLE = """
CREATE TABLE turns(
    key TEXT NOT NULL, id INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,
    PRIMARY KEY(key, id)) WITHOUT ROWID;
"""
_COLUMNS = {
    "ring": "user, id, timestamp, user_message, assistant_summary, session_name, workdir, scope",
    "turns": "key, id, role, content",
}
_TABLES = {"ring": RING_TABLE, "turns": TURNS_TABLE}


def migrate(db: sqlite3.Connection) -> None:
    """Rebuild a schema-2 file's ring and turns clustered, then mark it 3
    (`migrate_once`: two processes may open an old file). `secure_delete`
    zeroes the old tables' pages as they are dropped."""
    migrate_once(db, _is_version_2, _cluster)


def _is_version_2(db: sqlite3.Connection) -> bool:
    return schema_version(db) == "2"


def _cluster(db: sqlite3.Connection) -> None:
    for table, create in _TABLES.items():
        db.execute(f"ALTER TABLE {table} RENAME TO {table}_old")
        db.execute(create)
        columns = _COLUMNS[table]
        db.execute(f"INSERT INTO {table}({columns}) SELECT {columns} FROM {table}_old")
        db.execute(f"DROP TABLE {table}_old")  # its index goes with it
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (VERSION,))
