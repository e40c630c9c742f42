"""The SQLite store's inbox: its table and statements (see `core.ports.store.Inbox`).

One row per key. A pending row holds the message (JSON, `_codec.message_to_json`),
the answer and the sent refs (a JSON array) with `done_at` NULL; marking it
done sets `done_at` (wall clock) and NULLs the three, and `secure_delete` zeroes
the freed bytes, so a done marker keeps only the key and two times. `id` gives
pending rows with equal `received_at` their insertion order.

Every call is one SQL statement, run on its own (autocommit): SQLite takes
the write lock when such a statement starts, so the statement is the
transaction, atomic for every process sharing the file, and a BEGIN/COMMIT
round would only add two calls. The add is a single upsert that inserts, or
revives a marker older than the window (with a new `id`, as a new row
would get), or changes nothing, so the redelivery check cannot race.

Per message that is two small writes: the add (the row and its key's index
entry) and, inside the commit's transaction, one UPDATE by the unique key (the
row, in place, and an entry at the end of the partial index on `done_at`,
which holds done markers only). Pruning old markers is one range delete on
that index every `PRUNE_EVERY` adds of a process. `pending()` scans the table
(an hour's markers at most), which only start-up and a replica's sweep do.

`conversation` (the conversation's key, NULLed when done like the message)
has a partial index over pending rows only, so `PENDING_OF`, a
conversation's pending rows, reads that conversation's rows and no other
backlog. Files made before it get the column and the index at connect
(`CONVERSATION_MIGRATION`), filled in for the rows still pending.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from chatbridge.core.models import InboxEntry
from chatbridge.core.ports.store import DEDUPE_WINDOW
from chatbridge.stores._codec import (
    answer_to_json,
    message_from_json,
    message_to_json,
    sent_from_json,
    sent_to_json,
)

# Added after files were first made with schema 1, hence also created at connect.
INBOX_TABLE = """
CREATE TABLE IF NOT EXISTS inbox(
    id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, received_at REAL NOT NULL,
    message TEXT, answer TEXT, sent TEXT, done_at REAL, conversation TEXT);
CREATE INDEX IF NOT EXISTS inbox_done_at ON inbox(done_at) WHERE done_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS inbox_conversation ON inbox(conversation) WHERE done_at IS NULL;
"""
# What `connect` looks for: created last, so its presence means both exist.
INBOX_MARKER = "inbox_done_at"
CONVERSATION_MARKER = "inbox_conversation"
CONVERSATION_MIGRATION = """
ALTER TABLE inbox ADD COLUMN conversation TEXT;
UPDATE inbox SET conversation = json_extract(message, '$.platform') || ':'
    || json_extract(message, '$.chat') || ':' || json_extract(message, '$.thread') || ':'
    || json_extract(message, '$.user')
WHERE done_at IS NULL AND json_valid(message);
CREATE INDEX inbox_conversation ON inbox(conversation) WHERE done_at IS NULL;
"""
PRUNE_EVERY = 256

# ?6 is the cutoff: a marker done before it no longer refuses the key.
_ADD = """
INSERT INTO inbox(key, received_at, message, answer, sent, conversation)
VALUES (?1, ?2, ?3, ?4, ?5, ?7)
ON CONFLICT(key) DO UPDATE SET id = (SELECT max(id) + 1 FROM inbox),
    received_at = excluded.received_at, message = excluded.message,
    answer = excluded.answer, sent = excluded.sent, done_at = NULL,
    conversation = excluded.conversation
WHERE inbox.done_at < ?6"""
_PRUNE = "DELETE FROM inbox WHERE done_at < ?"
_PROGRESS = """
UPDATE inbox SET sent = ?1, answer = coalesce(?2, answer) WHERE key = ?3 AND done_at IS NULL"""
_DONE = """
UPDATE inbox SET message = NULL, answer = NULL, sent = NULL, conversation = NULL, done_at = ?
WHERE key = ? AND done_at IS NULL"""
PENDING = """
SELECT key, received_at, message, answer, sent FROM inbox
WHERE done_at IS NULL ORDER BY received_at, id"""
PENDING_OF = """
SELECT key, received_at, message, answer, sent FROM inbox
WHERE done_at IS NULL AND conversation = ? ORDER BY received_at, id"""
IS_PENDING = "SELECT 1 FROM inbox WHERE key = ? AND done_at IS NULL"
_encode = json.JSONEncoder(ensure_ascii=False).encode


def add(db: sqlite3.Connection, entry: InboxEntry, *, prune: bool) -> bool:
    """Store `entry` unless its key is pending or was done within the window;
    with `prune`, first drop every marker older than the window."""
    cutoff = entry.received_at - DEDUPE_WINDOW
    message, answer = _encode(message_to_json(entry.message)), answer_to_json(entry.answer)
    conversation = entry.message.conversation.key
    row = (entry.key, entry.received_at, message, answer, _sent(entry.sent), cutoff, conversation)
    if prune:
        db.execute(_PRUNE, (cutoff,))
    return db.execute(_ADD, row).rowcount == 1


def add_many(db: sqlite3.Connection, entries: Sequence[InboxEntry], *, prune: bool) -> list[bool]:
    """`add` of each of `entries` in order, in the caller's one transaction
    (a console's piped lines of one read); `prune` before the first."""
    return [add(db, entry, prune=prune and n == 0) for n, entry in enumerate(entries)]


def progress(db: sqlite3.Connection, key: str, sent: tuple[str, ...], answer: str | None) -> None:
    db.execute(_PROGRESS, (_sent(sent), answer_to_json(answer), key))


def _sent(sent: tuple[str, ...]) -> str:
    return _encode(sent_to_json(sent)) if sent else "[]"


def done(db: sqlite3.Connection, key: str, at: float) -> None:
    """Mark `key` done at `at`; a key that is not pending is left alone."""
    db.execute(_DONE, (at, key))


def entries(rows: list[tuple[Any, ...]]) -> list[InboxEntry]:
    """Rows of `PENDING` as entries; ValueError (naming the key, no text) if malformed."""
    out = []
    for key, received_at, message, answer, sent in rows:
        try:
            if not isinstance(message, str) or not isinstance(sent, str):
                raise ValueError("message or sent is missing")
            if answer is not None and not isinstance(answer, str):
                raise ValueError("answer is not text")
            parsed, refs = message_from_json(json.loads(message)), sent_from_json(json.loads(sent))
            out.append(InboxEntry(key, parsed, received_at, answer, refs))
        except ValueError as err:  # json.JSONDecodeError is a ValueError
            raise ValueError(f"inbox entry {key!r}: {err}") from None
    return out
