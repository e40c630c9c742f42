"""A damaged or foreign file is refused with one sentence naming it, and left byte-identical."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from chatbridge.core.ports.store import StoreCorrupt, StoreError
from tests.stores.helpers import exchange, new_store, opened, snapshot, store_path

GARBAGE = bytes(range(256)) * 64
SECRET = "private-9d2b"  # in every stored text; an error must never quote it
Damage = Callable[[Path], Awaitable[Path]]  # damages the store at `path`, returns the bad file


async def _real_store(backend: str, path: Path) -> None:
    store = await opened(backend, path)
    # SQLite: several pages, so truncation can cut on a page boundary; JSON writes are slow.
    for i in range(40 if backend == "sqlite" else 4):
        await store.commit_exchange(exchange(f"{SECRET} {i} " + "x" * 300, user=f"u{i}"))
    await store.aclose()


def _place(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _write(data: bytes) -> Damage:
    async def damage(path: Path) -> Path:
        return _place(path, data)

    return damage


def _mangle(backend: str, edit: Callable[[Path], None]) -> Damage:
    async def damage(path: Path) -> Path:
        await _real_store(backend, path)
        edit(path)
        return path

    return damage


def _cut(fraction: float, *, page_aligned: bool = False) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        data = path.read_bytes()
        size = int(len(data) * fraction)
        path.write_bytes(data[: size - size % 4096 if page_aligned else size])

    return edit


def _sql(statement: str) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        db = sqlite3.connect(path)
        db.execute(statement)
        db.commit()
        db.close()

    return edit


def _foreign_db(path: Path) -> None:
    path.unlink()
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes(body TEXT)")
    db.commit()
    db.close()


def _bad_page(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[4096 * 2 : 4096 * 3] = GARBAGE[:4096]  # header intact, a b-tree page is not
    path.write_bytes(bytes(data))


async def _foreign_with_hot_wal(path: Path) -> Path:
    return _copy_of_live_foreign_db(path)


def _copy_of_live_foreign_db(path: Path) -> Path:
    """A killed foreign process's files: the check must read the WAL, yet create nothing."""
    path.parent.mkdir(parents=True)
    live = path.with_name("live.db")
    db = sqlite3.connect(live, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA wal_autocheckpoint = 0")
    db.execute("CREATE TABLE notes(body TEXT)")
    db.execute("INSERT INTO notes VALUES ('in the wal only')")
    path.write_bytes(live.read_bytes())
    Path(f"{path}-wal").write_bytes(Path(f"{live}-wal").read_bytes())
    db.close()
    for leftover in path.parent.glob("live.db*"):
        leftover.unlink()
    return path


def _garbage_header(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(b"SQLite format 2\x00" + b"\xff" * 84 + data[100:])


def _state_file(backend: str, text: bytes) -> Damage:
    async def damage(path: Path) -> Path:
        await _real_store(backend, path)
        state = path.with_name(path.name + ".state.json")
        state.write_bytes(text)
        return state

    return damage


_BAD_INBOX_ROW = (
    f"INSERT INTO inbox(key, received_at, message, sent) VALUES ('t:1', 1, '[\"{SECRET}', '[]')"
)

CASES: dict[str, tuple[str, Callable[[str], Damage]]] = {
    "sqlite-garbage": ("sqlite", lambda b: _write(GARBAGE)),
    "sqlite-text": ("sqlite", lambda b: _write(b"hello, I am not a database\n" * 200)),
    "sqlite-empty": ("sqlite", lambda b: _write(b"")),
    "sqlite-header": ("sqlite", lambda b: _mangle(b, _garbage_header)),
    "sqlite-truncated": ("sqlite", lambda b: _mangle(b, _cut(0.5))),
    "sqlite-truncated-page": ("sqlite", lambda b: _mangle(b, _cut(0.5, page_aligned=True))),
    "sqlite-bad-page": ("sqlite", lambda b: _mangle(b, _bad_page)),
    "sqlite-foreign": ("sqlite", lambda b: _mangle(b, _foreign_db)),
    "sqlite-foreign-hot-wal": ("sqlite", lambda b: _foreign_with_hot_wal),
    "sqlite-blob-text": (
        "sqlite",
        lambda b: _mangle(b, _sql(f"UPDATE ring SET user_message = CAST('{SECRET}' AS BLOB)")),
    ),
    "sqlite-inbox-json": ("sqlite", lambda b: _mangle(b, _sql(_BAD_INBOX_ROW))),
    "sqlite-version": ("sqlite", lambda b: _mangle(b, _sql("UPDATE meta SET value = '99'"))),
    "json-garbage": ("json", lambda b: _write(GARBAGE)),
    "json-empty": ("json", lambda b: _write(b"")),
    "json-truncated": ("json", lambda b: _mangle(b, _cut(0.5))),
    "json-object": ("json", lambda b: _write(b'{"entries": []}')),
    "json-bad-entry": ("json", lambda b: _write(b'[{"timestamp": "yesterday"}]')),
    "json-bad-state": ("json", lambda b: _state_file(b, b'{"sessions": [1, 2]}')),
    "json-bad-tombstone": ("json", lambda b: _state_file(b, b'{"forgotten": {"ab": "now"}}')),
    "json-garbage-state": ("json", lambda b: _state_file(b, GARBAGE)),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_damaged_file_is_refused_and_untouched(case: str, tmp_path: Path) -> None:
    backend, make = CASES[case]
    path = store_path(backend, tmp_path)
    bad = await make(backend)(path)
    before = snapshot(tmp_path)

    with pytest.raises(StoreCorrupt) as err:
        await opened(backend, path)

    message = str(err.value)
    assert str(bad) in message
    assert "left untouched" in message
    assert "\n" not in message
    assert SECRET not in message
    assert snapshot(tmp_path) == before  # same files, same bytes, nothing new beside them


async def test_orphaned_wal_is_refused(tmp_path: Path) -> None:
    path = store_path("sqlite", tmp_path)
    _place(Path(f"{path}-wal"), b"frames of some other database")
    before = snapshot(tmp_path)
    with pytest.raises(StoreError, match="-wal exists"):
        await opened("sqlite", path)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("backend", ["sqlite", "json"])
async def test_unreadable_file_is_a_store_error(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = store_path(backend, tmp_path)
    await _real_store(backend, path)
    real_access = os.access
    # chmod alone does not stop root (CI containers), so deny through os.access too.
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != path and real_access(p, mode))
    path.chmod(0)
    try:
        with pytest.raises(StoreError, match="permission denied") as err:
            await new_store(backend, path).open()
        assert str(path) in str(err.value)
        assert not isinstance(err.value, StoreCorrupt)
    finally:
        path.chmod(0o600)
