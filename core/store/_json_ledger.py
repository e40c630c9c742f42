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
from chatbridge.core.store._codec import corrupt, unreadable

__all__ = ["book_bytes", "ledger_path", "read_book"]


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
