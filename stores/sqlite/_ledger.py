"""The limits ledger with SQLite (`core.ledger`): counters in the file, holds in the process.

One process serves a SQLite store (replicas need Redis), so the holds, the
`messages_per_minute` stamps and the last rate notice live in that process's
memory (`core.ledger.LedgerBook`), and `reserve` decides without awaiting
anything between reading and recording: no two messages of the process can
pass a limit together. A crash takes its holds with it, so nothing stays
reserved after one. The counters are in the file, in two places::

    ledger(account, period, tokens_in, tokens_out, requests, refused, nano_usd)
        period is a day (YYYY-MM-DD) in bot.timezone; a month is the sum of its days
    usage(user, day, ..., ledger_tokens_in, ledger_tokens_out, ledger_requests,
          ledger_nano_usd)
        the counters of account `person:<user>` that rode in an exchange's commit

An account's counters for a day are the sum of both. An answered message's
settlement is written in its exchange's own transaction (`commit_exchange`):
when its person is the exchange's ring owner and the day the same (`folds`,
the common case), into the usage row that commit writes anyway (one row and
one page fewer than a ledger row of its own); a scope's pool, a person
another ID links to and a forgotten user's answer get ledger rows. A failed
or cancelled request, and a refusal, go into `ledger` in one small
transaction of their own. `forget` moves the user's counters from their usage
rows into `ledger` (`KEEP_ON_FORGET`) before deleting the rows: counted use
outlives the user's data, as before. The store keeps the counters it read in
memory and adds each committed change to them, so a limit check costs the
answer path no read after an account's first. (Only the serving process
writes them; `chatbridge usage` reads the file.)

Files made before the usage row carried counters get its four columns at
connect (`migrate`), every one 0, so what their ledger rows hold still counts.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from chatbridge.core.ledger import PERSON_PREFIX, Counted, Hold, LedgerRow, Settlement, Tally
from chatbridge.stores.sqlite._migrate import migrate_once, schema_version

__all__ = [
    "ADD_USAGE_COUNTED",
    "KEEP_ON_FORGET",
    "LEDGER_MARKER",
    "LEDGER_TABLES",
    "add",
    "counted",
    "folds",
    "migrate",
    "rows",
]

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
# ?5 is the person's usage user (NULL for a scope's pool, which has none).
_COUNTERS = """
SELECT period = ?2, sum(tokens_in), sum(tokens_out), sum(requests), sum(refused), sum(nano_usd)
FROM (
    SELECT period, tokens_in, tokens_out, requests, refused, nano_usd FROM ledger
    WHERE account = ?1 AND period >= ?3 AND period < ?4
    UNION ALL
    SELECT day, ledger_tokens_in, ledger_tokens_out, ledger_requests, 0, ledger_nano_usd
    FROM usage WHERE user = ?5 AND day >= ?3 AND day < ?4 AND ledger_requests > 0)
GROUP BY period = ?2"""
_ROWS = """
SELECT account, period, sum(tokens_in), sum(tokens_out), sum(requests), sum(refused),
    sum(nano_usd)
FROM (
    SELECT account, period, tokens_in, tokens_out, requests, refused, nano_usd FROM ledger
    WHERE period >= ?1
    UNION ALL
    SELECT 'person:' || user, day, ledger_tokens_in, ledger_tokens_out, ledger_requests, 0,
        ledger_nano_usd
    FROM usage WHERE day >= ?1 AND ledger_requests > 0)
GROUP BY account, period ORDER BY account, period"""
# An exchange's usage and its settlement's counters for the person, in one row.
ADD_USAGE_COUNTED = """
INSERT INTO usage(user, day, input_tokens, output_tokens, ledger_tokens_in, ledger_tokens_out,
    ledger_requests, ledger_nano_usd)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(user, day) DO UPDATE SET input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens,
    ledger_tokens_in = ledger_tokens_in + excluded.ledger_tokens_in,
    ledger_tokens_out = ledger_tokens_out + excluded.ledger_tokens_out,
    ledger_requests = ledger_requests + excluded.ledger_requests,
    ledger_nano_usd = ledger_nano_usd + excluded.ledger_nano_usd"""
# Before `forget` deletes the user's usage rows: their counters go to `ledger`.
KEEP_ON_FORGET = """
INSERT INTO ledger(account, period, tokens_in, tokens_out, requests, refused, nano_usd)
SELECT 'person:' || user, day, ledger_tokens_in, ledger_tokens_out, ledger_requests, 0,
    ledger_nano_usd
FROM usage WHERE user = ? AND ledger_requests > 0
ON CONFLICT(account, period) DO UPDATE SET
    tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
    requests = requests + excluded.requests, nano_usd = nano_usd + excluded.nano_usd"""
_USAGE_COLUMNS = ("ledger_tokens_in", "ledger_tokens_out", "ledger_requests", "ledger_nano_usd")


def migrate(db: sqlite3.Connection) -> None:
    """Give a file made before them the usage row's counter columns (all 0),
    and schema version 2, which older builds refuse (they would not count
    what is stored there); `migrate_once`: two processes may open an old file."""
    migrate_once(db, _unmigrated, _add_usage_columns)


def _unmigrated(db: sqlite3.Connection) -> bool:
    return schema_version(db) in (None, "1") or not _has_usage_columns(db)


def _add_usage_columns(db: sqlite3.Connection) -> None:
    if not _has_usage_columns(db):
        for column in _USAGE_COLUMNS:
            db.execute(f"ALTER TABLE usage ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0")
    # A later version (`_layout`) already has the columns: it stays as it is.
    db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version' AND value = '1'")


def _has_usage_columns(db: sqlite3.Connection) -> bool:
    found = {row[0] for row in db.execute("SELECT name FROM pragma_table_info('usage')")}
    return found.issuperset(_USAGE_COLUMNS)


def folds(settlement: Settlement, user: str, day: str) -> bool:
    """Whether the settlement's first account is the person `user` on `day`:
    its counters then ride in the usage row of `user`'s exchange."""
    return settlement.day == day and settlement.accounts[0] == PERSON_PREFIX + user


def counted(db: sqlite3.Connection, hold: Hold) -> Counted:
    """Each account's settled (day, month) for `hold`."""
    found = {}
    month_end = f"{hold.month}-99"  # after every day of the month, before the next month
    for account in hold.accounts:
        key = account.key
        user = key[len(PERSON_PREFIX) :] if key.startswith(PERSON_PREFIX) else None
        day, rest = Tally(), Tally()
        for row in db.execute(_COUNTERS, (key, hold.day, hold.month, month_end, user)):
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
    found = db.execute(_ROWS, (since_day,)).fetchall()
    return [LedgerRow(r[0], r[1], Tally(*r[2:])) for r in found]
