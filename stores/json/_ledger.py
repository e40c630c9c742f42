"""The JSON store's limits ledger: a `core.ledger.LedgerBook` in `<path>.ledger.json`.

One process owns the JSON store (it locks the directory), so the book lives in
memory and every reserve and settle rewrites the file atomically before it
returns: check and write are one step for everyone who can reach the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chatbridge.core.ledger import HoldRow, LedgerBook, Tally
from chatbridge.core.links import LinkBook
from chatbridge.stores._codec import corrupt, unreadable

__all__ = ["book_bytes", "ledger_path", "links_bytes", "links_path", "read_book", "read_links"]


def ledger_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.ledger.json")


def read_book(path: Path) -> LedgerBook:
    """The book in `path`; a missing file is an empty book, a damaged one `StoreCorrupt`."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return LedgerBook()
    except OSError as err:
        raise unreadable(path, err) from err
    try:
        data = json.loads(raw)
        return LedgerBook(
            counters={
                a: {p: Tally(*map(int, v)) for p, v in periods.items()}
                for a, periods in data["counters"].items()
            },
            holds={
                a: {
                    h: HoldRow(str(v[0]), str(v[1]), int(v[2]), int(v[3]), float(v[4]))
                    for h, v in rows.items()
                }
                for a, rows in data["holds"].items()
            },
            stamps={a: {s: float(at) for s, at in v.items()} for a, v in data["stamps"].items()},
            notices={a: float(at) for a, at in data["notices"].items()},
        )
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise corrupt(path, "JSON", f"ledger: {type(err).__name__}") from None


def book_bytes(book: LedgerBook) -> bytes:
    data: dict[str, Any] = {
        "counters": {
            a: {
                p: [t.tokens_in, t.tokens_out, t.requests, t.refused, t.nano_usd]
                for p, t in periods.items()
            }
            for a, periods in book.counters.items()
        },
        "holds": {
            a: {h: [r.day, r.month, r.tokens, r.nano_usd, r.expires_at] for h, r in rows.items()}
            for a, rows in book.holds.items()
            if rows
        },
        "stamps": {a: dict(v) for a, v in book.stamps.items() if v},
        "notices": dict(book.notices),
    }
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def links_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.links.json")


def read_links(path: Path) -> LinkBook:
    """The links in `path` (`core.links.LinkBook`); missing: none; damaged: `StoreCorrupt`."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return LinkBook()
    except OSError as err:
        raise unreadable(path, err) from err
    try:
        data = json.loads(raw)
        return LinkBook(
            person={str(u): str(p) for u, p in data["person"].items()},
            codes={h: (str(v[0]), float(v[1])) for h, v in data["codes"].items()},
            attempts={u: (int(v[0]), float(v[1])) for u, v in data["attempts"].items()},
        )
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as err:
        raise corrupt(path, "JSON", f"links: {type(err).__name__}") from None


def links_bytes(book: LinkBook) -> bytes:
    data = {
        "person": book.person,
        "codes": {h: list(v) for h, v in book.codes.items()},
        "attempts": {u: list(v) for u, v in book.attempts.items()},
    }
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
