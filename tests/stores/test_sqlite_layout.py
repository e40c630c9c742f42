"""Schema 3 (`stores.sqlite._layout`): ring and turns clustered by owner;
files of schema 2 are rebuilt at open with their memory intact."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest

from chatbridge.core.models import MemoryEntry
from chatbridge.core.ports.store import StoreCorrupt
from tests.stores.helpers import Stores, exchange

# The two tables as schema 2 made them: rowid tables, an index on (owner, id).
_V2_TABLES = """
CREATE TABLE ring(
    id INTEGER PRIMARY KEY, user TEXT NOT NULL, timestamp REAL NOT NULL,
    user_message TEXT NOT NULL, assistant_summary TEXT NOT NULL,
    session_name TEXT NOT NULL, workdir TEXT NOT NULL, scope TEXT NOT NULL);
CREATE INDEX ring_user_id ON ring(user, id);
CREATE TABLE turns(
    id INTEGER PRIMARY KEY, key TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL);
CREATE INDEX turns_key_id ON turns(key, id);
"""
ALICE, BOB = "telegram:1", "telegram:2"
KEY = f"{ALICE}:chat"


def _entry(n: int, user: str) -> MemoryEntry:
    return MemoryEntry(1000.0 + n, f"Frage {n}", f"Antwort {n}", "sess", "/srv", user, "private")


def _as_version_2(path: Path) -> None:
    """Turn the (closed) file at `path` into what schema 2 left: its ring and
    turns tables replaced by the old ones, holding two users' interleaved
    entries (ids counting across users, as a rowid does) and a session."""
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("BEGIN")
        db.execute("DROP TABLE ring")
        db.execute("DROP TABLE turns")
        for statement in _V2_TABLES.split(";")[:-1]:
            db.execute(statement)
        for n in range(1, 7):
            e = _entry(n, ALICE if n % 2 else BOB)
            db.execute(
                "INSERT INTO ring VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (n, e.user, e.timestamp, e.user_message, e.assistant_summary,
                 e.session_name, e.workdir, e.scope),
            )  # fmt: skip
        db.execute("INSERT INTO sessions VALUES (?, ?, 900.0, 1005.0)", (KEY, ALICE))
        for n, role in enumerate(["user", "assistant", "user", "assistant"], start=10):
            db.execute("INSERT INTO turns VALUES (?, ?, ?, ?)", (n, KEY, role, f"Zug {n}"))
        db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        db.execute("COMMIT")


async def test_a_version_2_file_opens_with_its_memory_intact(
    tmp_path: Path, stores: Stores
) -> None:
    path = tmp_path / "chatbridge.db"
    await (await stores("sqlite", path)).aclose()
    _as_version_2(path)

    store = await stores("sqlite", path)
    assert await store.ring(ALICE, since=0.0) == [_entry(n, ALICE) for n in (1, 3, 5)]
    assert await store.ring(BOB, since=0.0) == [_entry(n, BOB) for n in (2, 4, 6)]
    session = await store.load_session(KEY)
    assert session is not None
    assert (session.user, session.started_at, session.last_active) == (ALICE, 900.0, 1005.0)
    assert [t.content for t in session.turns] == ["Zug 10", "Zug 11", "Zug 12", "Zug 13"]

    # What is written next comes after what was there, in both tables.
    later = exchange("neu", user=ALICE, ts=2000.0, key=KEY, started=900.0)
    turns = [*session.turns, *later.session.turns]
    await store.commit_exchange(replace(later, session=replace(later.session, turns=turns)))
    await store.aclose()
    again = await stores("sqlite", path)
    ring = await again.ring(ALICE, since=0.0)
    assert [e.user_message for e in ring] == ["Frage 1", "Frage 3", "Frage 5", "neu"]
    session = await again.load_session(KEY)
    assert session is not None
    assert [t.content for t in session.turns][-3:] == ["Zug 13", "neu", "answer to neu"]
    assert len(session.turns) == 6
    await again.aclose()

    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            "3",
        )
        tables = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
        assert "WITHOUT ROWID" in tables["ring"]
        assert "WITHOUT ROWID" in tables["turns"]
        assert not {"ring_old", "turns_old"} & tables.keys()
        indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert not {"ring_user_id", "turns_key_id"} & indexes


async def test_a_file_of_a_later_schema_is_refused_in_one_sentence(
    tmp_path: Path, stores: Stores
) -> None:
    """What an older build does with this build's files: the version check."""
    path = tmp_path / "chatbridge.db"
    await (await stores("sqlite", path)).aclose()
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    with pytest.raises(StoreCorrupt, match=r"schema version 4, this build reads 1 to 3") as err:
        await stores("sqlite", path)
    assert "\n" not in str(err.value)


async def test_the_file_keeps_a_users_newest_entries_and_no_more(
    tmp_path: Path, stores: Stores
) -> None:
    """The ring's trim runs before its insert (`_TRIM` keeps max_entries - 1):
    what reads cannot show, the rows on disk, is exactly the newest five."""
    path = tmp_path / "chatbridge.db"
    store = await stores("sqlite", path, max_entries=5)
    await store.commit_exchange(exchange("von Bob", user=BOB, ts=999.0))
    for n in range(8):
        await store.commit_exchange(exchange(f"Frage {n}", user=ALICE, ts=1000.0 + n))
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT user, user_message FROM ring ORDER BY user, id").fetchall()
    assert rows == [(ALICE, f"Frage {n}") for n in range(3, 8)] + [(BOB, "von Bob")]


async def test_two_users_damaged_rows_of_the_same_id_are_each_reported(
    tmp_path: Path, stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    """Ring ids count per owner, so Alice and Bob both have a row 1: a damaged
    one of each is two reports, not one taken for the other."""
    path = tmp_path / "chatbridge.db"
    store = await stores("sqlite", path)
    for user in (ALICE, BOB):
        await store.commit_exchange(exchange(f"von {user}", user=user, ts=1000.0))
        await store.commit_exchange(exchange(f"mehr von {user}", user=user, ts=1001.0))
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        ids = db.execute("SELECT user, id FROM ring WHERE id = 1 ORDER BY user").fetchall()
        assert ids == [(ALICE, 1), (BOB, 1)]
        db.execute("UPDATE ring SET user_message = CAST(x'ff' AS TEXT) WHERE id = 1")
    with caplog.at_level("WARNING"):
        assert len(await store.ring(ALICE, since=0.0)) == 1
        assert len(await store.ring(BOB, since=0.0)) == 1
    reports = [
        r.getMessage() for r in caplog.records if "damaged row 1 in table ring" in r.getMessage()
    ]
    assert len(reports) == 2, reports
    assert not [r for r in reports if ALICE in r or BOB in r]  # owners are never logged
