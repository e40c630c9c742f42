"""The limits ledger in SQLite (`core.ledger`): four small tables in the store file.

`reserve` reads, decides and writes inside one `BEGIN IMMEDIATE` transaction,
which holds SQLite's write lock, so two processes (or two messages) cannot
both see room for one more request. Tables::

    ledger(account, period, tokens_in, tokens_out, requests, refused, nano_usd)
        period is a day (YYYY-MM-DD) or a month (YYYY-MM) in bot.timezone
    ledger_holds(account, id, day, month, tokens, nano_usd, expires_at)
    ledger_stamps(account, id, at)      admitted requests, for messages_per_minute
    ledger_notices(account, at)         the last messages_per_minute notice

Holds and stamps past their time are deleted by the next reserve of the account.
"""

from __future__ import annotations

import sqlite3

from chatbridge.core.ledger import (
    RATE_WINDOW,
    Hold,
    LedgerRow,
    Settlement,
    Snapshot,
    Tally,
    Verdict,
    decide,
)

__all__ = ["LEDGER_MARKER", "LEDGER_TABLES", "reserve", "rows", "settle", "snapshots"]

LEDGER_MARKER = "ledger_notices"  # created last: its presence means all four exist
LEDGER_TABLES = """
CREATE TABLE IF NOT EXISTS ledger(
    account TEXT NOT NULL, period TEXT NOT NULL, tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0, requests INTEGER NOT NULL DEFAULT 0,
    refused INTEGER NOT NULL DEFAULT 0, nano_usd INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY(account, period)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger_holds(
    account TEXT NOT NULL, id TEXT NOT NULL, day TEXT NOT NULL, month TEXT NOT NULL,
    tokens INTEGER NOT NULL, nano_usd INTEGER NOT NULL, expires_at REAL NOT NULL,
    PRIMARY KEY(account, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger_stamps(
    account TEXT NOT NULL, id TEXT NOT NULL, at REAL NOT NULL,
    PRIMARY KEY(account, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger_notices(
    account TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID;
"""

_ADD = """
INSERT INTO ledger(account, period, tokens_in, tokens_out, requests, refused, nano_usd)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(account, period) DO UPDATE SET
    tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
    requests = requests + excluded.requests, refused = refused + excluded.refused,
    nano_usd = nano_usd + excluded.nano_usd"""
_COUNTERS = """
SELECT period, tokens_in, tokens_out, requests, refused, nano_usd FROM ledger
WHERE account = ? AND period IN (?, ?)"""
_HELD = """
SELECT
    coalesce(sum(CASE WHEN day = ?2 THEN tokens END), 0),
    coalesce(sum(CASE WHEN day = ?2 THEN nano_usd END), 0),
    coalesce(sum(CASE WHEN month = ?3 THEN tokens END), 0),
    coalesce(sum(CASE WHEN month = ?3 THEN nano_usd END), 0)
FROM ledger_holds WHERE account = ?1 AND expires_at > ?4"""
_RECENT = "SELECT count(*) FROM ledger_stamps WHERE account = ? AND at > ?"
_NOTICED = "SELECT at FROM ledger_notices WHERE account = ?"


def snapshots(db: sqlite3.Connection, hold: Hold) -> dict[str, Snapshot]:
    """Each account's `Snapshot` for `hold` (read inside the caller's transaction)."""
    found = {}
    for account in hold.accounts:
        key = account.key
        tallies = {
            row[0]: Tally(*row[1:])
            for row in db.execute(_COUNTERS, (key, hold.day, hold.month)).fetchall()
        }
        hd_t, hd_n, hm_t, hm_n = db.execute(_HELD, (key, hold.day, hold.month, hold.now)).fetchone()
        (recent,) = db.execute(_RECENT, (key, hold.now - RATE_WINDOW)).fetchone()
        noticed = db.execute(_NOTICED, (key,)).fetchone()
        found[key] = Snapshot(
            tallies.get(hold.day, Tally()),
            tallies.get(hold.month, Tally()),
            (hd_t, hd_n),
            (hm_t, hm_n),
            recent,
            noticed[0] if noticed else None,
        )
    return found


def reserve(db: sqlite3.Connection, hold: Hold) -> Verdict:
    """Prune, decide and record `hold` (or the refusal); call inside BEGIN IMMEDIATE."""
    for account in hold.accounts:
        db.execute(
            "DELETE FROM ledger_holds WHERE account = ? AND expires_at <= ?",
            (account.key, hold.now),
        )
        db.execute(
            "DELETE FROM ledger_stamps WHERE account = ? AND at <= ?",
            (account.key, hold.now - RATE_WINDOW),
        )
    verdict = decide(hold, snapshots(db, hold))
    keys = [a.key for a in hold.accounts]
    if not verdict.ok:
        for key in keys:
            for period in (hold.day, hold.month):
                db.execute(_ADD, (key, period, 0, 0, 0, 1, 0))
        if verdict.notify and verdict.kind == "messages_per_minute":
            db.execute(
                "INSERT OR REPLACE INTO ledger_notices(account, at) VALUES (?, ?)",
                (verdict.account, hold.now),
            )
        return verdict
    db.executemany(
        "INSERT OR REPLACE INTO ledger_holds VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (key, hold.id, hold.day, hold.month, hold.tokens, hold.nano_usd, hold.expires_at)
            for key in keys
        ],
    )
    db.executemany(
        "INSERT OR REPLACE INTO ledger_stamps VALUES (?, ?, ?)",
        [(key, hold.id, hold.now) for key in keys],
    )
    return verdict


def settle(db: sqlite3.Connection, s: Settlement) -> None:
    """Replace the hold with what was used; call inside one transaction."""
    for key in s.accounts:
        db.execute("DELETE FROM ledger_holds WHERE account = ? AND id = ?", (key, s.id))
        if not s.answered:
            db.execute("DELETE FROM ledger_stamps WHERE account = ? AND id = ?", (key, s.id))
        for period in (s.day, s.month):
            db.execute(_ADD, (key, period, s.tokens_in, s.tokens_out, 1, 0, s.nano_usd))


def rows(db: sqlite3.Connection, *, since_day: str) -> list[LedgerRow]:
    """Day rows (not months) from `since_day` on, by account then day."""
    found = db.execute(
        "SELECT account, period, tokens_in, tokens_out, requests, refused, nano_usd FROM ledger "
        "WHERE length(period) = 10 AND period >= ? ORDER BY account, period",
        (since_day,),
    ).fetchall()
    return [LedgerRow(r[0], r[1], Tally(*r[2:])) for r in found]
