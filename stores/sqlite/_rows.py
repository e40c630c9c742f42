"""Reading SQLite rows one at a time: a damaged row costs that row, not the read.

A row that cannot be decoded (text that is not UTF-8, a value of the wrong
storage class, JSON that does not parse) is skipped and reported once per
process by file, table and row id — never by its content. The rest of the
read goes on: a session loads without the damaged turn, a ring without the
damaged entry.

Why not sqlite3's own decoding: it raises for the whole query on the first
bad row, and its message quotes the row (`Could not decode to UTF-8 column
'content' with text '…'`), which would put private text into a log line.
So the reads here fetch text as bytes (`text_factory`) and decode each value
themselves. `reason` gives the words of any other sqlite3 error without
what Python's module may quote.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from chatbridge.stores.sqlite._check import COLUMNS

__all__ = ["DamagedRow", "RowReader", "chained", "reason"]

log = logging.getLogger(__name__)

# The identity columns the reads select first; not in `_check.COLUMNS`.
_IDS = {"rowid": ("integer",), "id": ("integer",)}
_EXTRA: dict[str, dict[str, tuple[str, ...]]] = {
    "cursors": {
        "platform": ("text",), "channel": ("text",), "last_id": ("integer",),
        "updated_at": ("real", "integer"),
    },
}  # fmt: skip
_PYTHON = {"text": str, "real": float, "integer": int, "null": type(None), "blob": bytes}


class _Undecodable:
    """What a TEXT value that is not UTF-8 reads as (its bytes are dropped)."""

    __slots__ = ()


_UNDECODABLE = _Undecodable()


def _decode(raw: bytes) -> str | _Undecodable:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return _UNDECODABLE


class DamagedRow(ValueError):
    """Raised by a caller's row parser for a row it cannot use; names no value."""


class RowReader:
    """Reads rows of one store file; remembers which damaged rows it reported."""

    def __init__(self, path: Path) -> None:
        self._path = path
        # (table, owner, id): ring and turn ids count per owner (schema 3), so
        # two users' damaged row 3 are two reports. The owner is never logged.
        self._reported: set[tuple[str, object, object]] = set()
        self.skipped = 0  # damaged rows met, reported or not: a read that met none is whole

    def read(
        self,
        db: sqlite3.Connection,
        sql: str,
        args: tuple[object, ...],
        *,
        table: str,
        columns: str,
        owner: object = None,
    ) -> list[tuple[Any, ...]]:
        """The rows of `sql` whose every value decodes and has its column's type.

        `columns` names the selected columns in order (space-separated); the
        first identifies the row (`rowid`, `id`, or the inbox `key`) within
        `owner` (whose ring or session the rows are, when ids count per owner)
        and is what a report names. Raises `sqlite3.Error` for a failing query.
        """
        allowed = _allowed_types(table, columns)
        factory = db.text_factory
        db.text_factory = _decode
        try:
            rows = db.execute(sql, args).fetchall()
        finally:
            db.text_factory = factory
        good = []
        for row in rows:
            if all(type(v) in ok for v, ok in zip(row, allowed, strict=True)):
                good.append(row)
            else:
                self.skip(table, row[0], owner)
        return good

    def parsed(
        self, table: str, rows: Iterable[tuple[Any, ...]], parse: Callable[[tuple[Any, ...]], Any]
    ) -> list[Any]:
        """`parse(row)` for each row; a row it refuses (ValueError) is skipped."""
        out = []
        for row in rows:
            try:
                out.append(parse(row))
            except ValueError:
                self.skip(table, row[0])
        return out

    def skip(self, table: str, ident: object, owner: object = None) -> None:
        """Report a damaged row once; `ident` is its id (never its content)."""
        self.skipped += 1
        shown = ident if isinstance(ident, int | str) else "?"
        if (table, owner, shown) in self._reported:
            return
        self._reported.add((table, owner, shown))
        log.warning(
            "%s: skipped damaged row %s in table %s (it cannot be read; the rest loads without it)",
            self._path,
            shown if isinstance(shown, int) else repr(shown),
            table,
        )


@functools.lru_cache(maxsize=64)
def _allowed_types(table: str, columns: str) -> tuple[frozenset[type], ...]:
    """The Python types each of `columns` (space-separated) may read as."""
    return tuple(
        frozenset(_PYTHON[k] for k in _IDS.get(name) or {**COLUMNS, **_EXTRA}[table][name])
        for name in columns.split()
    )


def reason(err: sqlite3.Error | OSError) -> str:
    """The words of a sqlite3 error that never quote stored text.

    SQLite's own errors (they carry `sqlite_errorname`) name tables, columns
    and conditions ("database or disk is full"); errors raised by Python's
    module itself may quote a value, so only their class is given. An
    `OSError` (the WAL marker's file I/O) names a file and a condition.
    """
    if isinstance(err, OSError) or getattr(err, "sqlite_errorname", None):
        return " ".join(str(err).split())[:200]
    return type(err).__name__


def chained(err: sqlite3.Error | OSError) -> BaseException | None:
    """The cause to chain a `StoreError` to: the error itself when it is
    SQLite's own (or an OSError), else none (a traceback would print its
    quoting message)."""
    return err if isinstance(err, OSError) or getattr(err, "sqlite_errorname", None) else None
