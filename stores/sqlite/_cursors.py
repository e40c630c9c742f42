"""The SQLite store's channel cursors (see `core.ports.ChannelCursors`).

One row per (platform, channel): the newest message ID handled there and the
wall time of that traffic. Advancing is one upsert that never moves a cursor
back; listing first deletes the channels quiet for longer than asked, so the
table holds only channels with recent traffic.
"""

from __future__ import annotations

# Added after files were first made with schema 1, hence also created at connect.
CURSORS_TABLE = """
CREATE TABLE IF NOT EXISTS cursors(
    id INTEGER PRIMARY KEY, platform TEXT NOT NULL, channel TEXT NOT NULL,
    last_id INTEGER NOT NULL, updated_at REAL NOT NULL, UNIQUE(platform, channel));
CREATE INDEX IF NOT EXISTS cursors_recent ON cursors(platform, updated_at);
"""
CURSORS_MARKER = "cursors_recent"  # created last: its presence means both exist

ADVANCE = """
INSERT INTO cursors(platform, channel, last_id, updated_at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT(platform, channel) DO UPDATE SET last_id = max(last_id, excluded.last_id),
    updated_at = max(updated_at, excluded.updated_at)"""
FORGET_QUIET = "DELETE FROM cursors WHERE platform = ? AND updated_at < ?"
RECENT = """
SELECT id, channel, last_id, updated_at FROM cursors WHERE platform = ?
ORDER BY updated_at DESC LIMIT ?"""
RECENT_COLUMNS = "id channel last_id updated_at"
