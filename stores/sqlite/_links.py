"""Links between platform IDs in SQLite (`core.links`): three small tables.

    links(user, person)                     every linked ID and its person key
    link_codes(code_hash, user, expires_at) open codes, by SHA-256 only
    link_attempts(user, failures, locked_until)

Each store call is one transaction; join and split read the rows they change
inside it and apply `core.links.LinkBook`'s rules to them.
"""

from __future__ import annotations

import sqlite3

from chatbridge.core.links import LinkBook

__all__ = ["LINKS_MARKER", "LINKS_TABLES", "attempt", "group", "join", "offer", "split", "take"]

LINKS_MARKER = "link_attempts"
LINKS_TABLES = """
CREATE TABLE IF NOT EXISTS links(user TEXT PRIMARY KEY, person TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS links_person ON links(person);
CREATE TABLE IF NOT EXISTS link_codes(
    code_hash TEXT PRIMARY KEY, user TEXT NOT NULL, expires_at REAL NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS link_attempts(
    user TEXT PRIMARY KEY, failures INTEGER NOT NULL, locked_until REAL NOT NULL) WITHOUT ROWID;
"""


def offer(db: sqlite3.Connection, user: str, hashed: str, expires_at: float, now: float) -> None:
    db.execute("DELETE FROM link_codes WHERE user = ? OR expires_at <= ?", (user, now))
    db.execute("INSERT OR REPLACE INTO link_codes VALUES (?, ?, ?)", (hashed, user, expires_at))


def take(db: sqlite3.Connection, hashed: str, now: float) -> str | None:
    row = db.execute(
        "SELECT user, expires_at FROM link_codes WHERE code_hash = ?", (hashed,)
    ).fetchone()
    db.execute("DELETE FROM link_codes WHERE code_hash = ?", (hashed,))
    return str(row[0]) if row is not None and row[1] > now else None


def attempt(db: sqlite3.Connection, user: str, now: float, failed: bool) -> float | None:
    book = LinkBook()
    row = db.execute(
        "SELECT failures, locked_until FROM link_attempts WHERE user = ?", (user,)
    ).fetchone()
    if row is not None:
        book.attempts[user] = (int(row[0]), float(row[1]))
    locked = book.attempt(user, now, failed)
    if user in book.attempts:
        db.execute(
            "INSERT OR REPLACE INTO link_attempts VALUES (?, ?, ?)", (user, *book.attempts[user])
        )
    return locked


def _book(db: sqlite3.Connection, users: list[str]) -> LinkBook:
    """The link rows of `users`' persons (all a join or split can touch)."""
    book = LinkBook()
    marks = ",".join("?" * len(users))
    persons = [r[0] for r in db.execute(f"SELECT person FROM links WHERE user IN ({marks})", users)]
    people = sorted(set(persons) | set(users))
    marks = ",".join("?" * len(people))
    for user, person in db.execute(
        f"SELECT user, person FROM links WHERE person IN ({marks}) OR user IN ({marks})",
        [*people, *people],
    ):
        book.person[user] = person
    return book


def _write(db: sqlite3.Connection, before: LinkBook, after: LinkBook) -> None:
    for user in set(before.person) - set(after.person):
        db.execute("DELETE FROM links WHERE user = ?", (user,))
    db.executemany(
        "INSERT OR REPLACE INTO links VALUES (?, ?)",
        [(u, p) for u, p in after.person.items() if before.person.get(u) != p],
    )


def join(db: sqlite3.Connection, first: str, second: str) -> str:
    book = _book(db, [first, second])
    before = LinkBook(person=dict(book.person))
    root = book.join(first, second)
    _write(db, before, book)
    db.execute("DELETE FROM link_attempts WHERE user = ?", (second,))
    return root


def split(db: sqlite3.Connection, user: str) -> bool:
    book = _book(db, [user])
    before = LinkBook(person=dict(book.person))
    done = book.split(user)
    _write(db, before, book)
    return done


def group(db: sqlite3.Connection, user: str) -> tuple[str, ...]:
    row = db.execute("SELECT person FROM links WHERE user = ?", (user,)).fetchone()
    if row is None:
        return ()
    members = db.execute(
        "SELECT user FROM links WHERE person = ? ORDER BY user", (row[0],)
    ).fetchall()
    return (str(row[0]), *(str(m[0]) for m in members))
