"""The SQLite store's two ways to write (`_txn`, `_autocommit`): whatever
ends a transaction early leaves nothing of it behind, a sqlite3 error comes
out as `StoreError`, and the connection takes the next write."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatbridge.core.ports.store import StoreError
from chatbridge.stores.sqlite.store import SqliteStore
from tests.stores.helpers import Stores

INSERT = "INSERT INTO meta(key, value) VALUES (?, 'x')"


async def sqlite(stores: Stores, tmp_path: Path) -> SqliteStore:
    store = await stores("sqlite", tmp_path / "m.db")
    assert isinstance(store, SqliteStore)
    return store


def interrupted(store: SqliteStore) -> None:
    with store._txn() as db:
        db.execute(INSERT, ("half",))
        raise RuntimeError("mid-write")


def inserted_twice(store: SqliteStore) -> None:
    with store._txn() as db:
        db.execute(INSERT, ("half",))
        db.execute(INSERT, ("half",))  # the same key again: a constraint fails


def keys(store: SqliteStore) -> set[str]:
    return {row[0] for row in store._conn().execute("SELECT key FROM meta")}


async def test_an_exception_in_a_transaction_rolls_it_back_and_goes_on_unchanged(
    stores: Stores, tmp_path: Path
) -> None:
    store = await sqlite(stores, tmp_path)
    with pytest.raises(RuntimeError, match="mid-write"):
        interrupted(store)
    assert "half" not in keys(store)
    assert not store._conn().in_transaction
    with store._txn() as db:
        db.execute(INSERT, ("next",))
    assert "next" in keys(store)


async def test_a_failing_statement_rolls_back_the_transaction_as_a_store_error(
    stores: Stores, tmp_path: Path
) -> None:
    store = await sqlite(stores, tmp_path)
    with pytest.raises(StoreError, match="write failed"):
        inserted_twice(store)
    assert "half" not in keys(store)
    assert not store._conn().in_transaction


async def test_a_failing_autocommit_statement_is_a_store_error_and_the_next_is_written(
    stores: Stores, tmp_path: Path
) -> None:
    store = await sqlite(stores, tmp_path)
    with store._autocommit() as db:
        db.execute(INSERT, ("once",))
    with pytest.raises(StoreError, match="write failed"), store._autocommit() as db:
        db.execute(INSERT, ("once",))
    with store._autocommit() as db:
        db.execute(INSERT, ("twice",))
    assert {"once", "twice"} <= keys(store)
