"""The limits ledger with SQLite (`core.ledger`): counters in the file, holds in the process.

One process serves a SQLite store (replicas need Redis), so the holds, the
`messages_per_minute` stamps and the last rate notice live in that process's
memory (`core.ledger.LedgerBook`), and `reserve` decides without awaiting
anything between reading and recording: no two messages of the process can
pass a limit together. A crash takes its holds with it, so nothing stays
reserved after one. The counters are in the file::

    ledger(account, period, tokens_in, tokens_out, requests, refused, nano_usd)
        period is a day (YYYY-MM-DD) in bot.timezone; a month is the sum of its days

An answered message's settlement is written in its exchange's own
transaction (`commit_exchange`); a failed or cancelled one, and a refusal,
in one small transaction of its own. The store keeps the counters it read in
memory and adds each committed change to them, so a limit check costs the
answer path no read after an account's first, and two upserts inside a commit
it makes anyway. (Only the serving process writes them; `chatbridge usage`
reads the file.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from chatbridge.core.ledger import Counted, Hold, LedgerRow, Tally

__all__ = ["LEDGER_MARKER", "LEDGER_TABLES", "add", "counted", "rows"]

LEDGER_MARKER = "ledger"
LEDGER_TABLES = """
CREATE TABLE IF NOT EXISTS ledger(
    account TEXT NOT NULL, period TEXT NOT NULL, tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0, requests INTEGER NOT NULL DEFAULT 0,
    refused INTEGER NOT NULL DEFAULT 0, nano_usd INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY(account, period)) WITHOUT ROWID;
"""

_ADD = """
INSERT INTO ledger(account, period, tokens_in, tokens_out, requests, refused, nano_usd)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(account, period) DO UPDATE SET
    tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
    requests = requests + excluded.requests, refused = refused + excluded.refused,
    nano_usd = nano_usd + excluded.nano_usd"""
# Only days are stored (one upsert per answer); a month is the sum of its days.
_COUNTERS = """
SELECT period = ?2, sum(tokens_in), sum(tokens_out), sum(requests), sum(refused), sum(nano_usd)
FROM ledger WHERE account = ?1 AND period >= ?3 AND period < ?4 GROUP BY period = ?2"""


def counted(db: sqlite3.Connection, hold: Hold) -> Counted:
    """Each account's settled (day, month) for `hold`."""
    found = {}
    month_end = f"{hold.month}-99"  # after every day of the month, before the next month
    for account in hold.accounts:
        day, rest = Tally(), Tally()
        for row in db.execute(_COUNTERS, (account.key, hold.day, hold.month, month_end)):
            if row[0]:
                day = Tally(*row[1:])
            else:
                rest = Tally(*row[1:])
        found[account.key] = (day, day + rest)
    return found


def add(db: sqlite3.Connection, keys: Iterable[str], day: str, month: str, t: Tally) -> None:
    """Add `t` to each account's `day` (its `month` is the sum of its days)."""
    for key in keys:  # mostly one: the person (and a scope's pool)
        db.execute(_ADD, (key, day, t.tokens_in, t.tokens_out, t.requests, t.refused, t.nano_usd))


def rows(db: sqlite3.Connection, *, since_day: str) -> list[LedgerRow]:
    """Day rows (not months) from `since_day` on, by account then day."""
    found = db.execute(
        "SELECT account, period, tokens_in, tokens_out, requests, refused, nano_usd FROM ledger "
        "WHERE period >= ? ORDER BY account, period",
        (since_day,),
    ).fetchall()
    return [LedgerRow(r[0], r[1], Tally(*r[2:])) for r in found]
