"""What a `chatbridge run` child's SQLite inbox holds, read from outside.

Read-only, on a connection of our own, as `chatbridge memory` would: safe while
the child runs (WAL readers never block its writer) and after it was killed.
"Nothing pending" is the condition after which a child can post nothing more,
so tests wait for it instead of sleeping before they look for duplicates.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

__all__ = ["pending", "recorded_refs"]


def _rows(db: Path) -> list[tuple[str | None]]:
    if not db.exists():
        return []
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT sent FROM inbox WHERE done_at IS NULL").fetchall()
    finally:
        conn.close()


def pending(db: Path) -> int:
    """How many received messages are not answered (done) yet."""
    return len(_rows(db))


def recorded_refs(db: Path) -> set[str]:
    """The message references recorded with the pending entries (`chat:message_id`)."""
    return {ref for (sent,) in _rows(db) for ref in json.loads(sent or "[]")}
