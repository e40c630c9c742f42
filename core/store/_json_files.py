"""Reading, validating and atomically writing the JSON store's two files.

Readers raise `StoreCorrupt` naming the file for anything malformed and never
write; `atomic_write` leaves either the old or the new file, never a torn one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chatbridge.core.models import InboxEntry, MemoryEntry, Session, Usage
from chatbridge.core.store._codec import (
    corrupt,
    entry_from_json,
    entry_to_json,
    fsync_dir,
    inbox_from_json,
    inbox_to_json,
    is_num,
    session_from_json,
    session_to_json,
    unreadable,
)
from chatbridge.core.store.base import StoreError


@dataclass(slots=True)
class State:
    """The sidecar: sessions by key, usage by user then day, the commit marker,
    `forget`'s tombstones (SHA-256 of the user ID → wall-clock time), the
    pending inbox entries by key in insertion order, and the done markers
    (key → wall-clock time it was done; nothing else is kept of them)."""

    sessions: dict[str, Session] = field(default_factory=dict)
    usage: dict[str, dict[str, Usage]] = field(default_factory=dict)
    last_entry: MemoryEntry | None = None
    forgotten: dict[str, float] = field(default_factory=dict)
    inbox: dict[str, InboxEntry] = field(default_factory=dict)
    inbox_done: dict[str, float] = field(default_factory=dict)


def read_ring(path: Path) -> list[MemoryEntry]:
    """The ring file's entries in file order; a missing file is an empty ring."""
    data = _read_json(path)
    if data is None:
        return []
    if not isinstance(data, list):
        raise corrupt(path, "JSON", "expected a JSON array of entries")
    entries = []
    for index, item in enumerate(data):
        try:
            entries.append(entry_from_json(item))
        except ValueError as err:
            raise corrupt(path, "JSON", f"entry {index}: {err}") from err
    return entries


def read_state(path: Path) -> State:
    data = _read_json(path)
    if data is None:
        return State()
    try:
        sessions, usage = _object(data, "sessions"), _object(data, "usage")
        if not all(isinstance(days, dict) for days in usage.values()):
            raise ValueError("usage must map users to days")
        forgotten = _object(data, "forgotten")  # absent in files written before tombstones
        if not all(is_num(at) for at in forgotten.values()):
            raise ValueError("forgotten must map hashes to times")
        last = data.get("last_entry")
        inbox, done = _inbox(data)
        return State(
            {key: session_from_json(key, raw) for key, raw in sessions.items()},
            {
                user: {
                    day: Usage(_count(u, "input_tokens"), _count(u, "output_tokens"))
                    for day, u in days.items()
                }
                for user, days in usage.items()
            },
            None if last is None else entry_from_json(last),
            {h: float(at) for h, at in forgotten.items()},
            inbox,
            done,
        )
    except (ValueError, TypeError, KeyError) as err:
        raise corrupt(path, "JSON", f"malformed state: {err}") from err


def _count(usage: object, name: str) -> int:
    """A token counter; the error names the field, never the stored value."""
    value = usage.get(name) if isinstance(usage, dict) else None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"usage.{name} is malformed")
    return value


def ring_bytes(entries: list[MemoryEntry]) -> bytes:
    return _dumps([entry_to_json(e) for e in entries])


def state_bytes(state: State) -> bytes:
    return _dumps(
        {
            "sessions": {key: session_to_json(s) for key, s in state.sessions.items()},
            "usage": {
                user: {
                    day: {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens}
                    for day, u in days.items()
                }
                for user, days in state.usage.items()
                if days
            },
            "last_entry": None if state.last_entry is None else entry_to_json(state.last_entry),
            "forgotten": state.forgotten,
            "inbox": [inbox_to_json(e) for e in state.inbox.values()],
            "inbox_done": state.inbox_done,
        }
    )


def atomic_write(path: Path, data: bytes) -> None:
    """Temp file in the same directory, fsync, rename, fsync the directory.

    Mode 0600 because the files hold private messages.
    """
    tmp = temp_name(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise StoreError(f"{path} could not be written ({err.strerror}); check disk space") from err


def temp_name(path: Path) -> Path:
    """Hidden and per-process; `open()` removes leftovers matching `.<name>*.tmp`."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _read_json(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise unreadable(path, err) from err
    if not raw.strip():
        raise corrupt(path, "JSON", "file is empty")
    try:
        return json.loads(raw)
    except ValueError as err:  # includes UnicodeDecodeError
        raise corrupt(path, "JSON", f"invalid JSON: {err}") from err


def _inbox(data: dict[str, Any]) -> tuple[dict[str, InboxEntry], dict[str, float]]:
    """Both are absent in files written before the inbox existed."""
    raw = data.get("inbox", [])
    if not isinstance(raw, list):
        raise ValueError("inbox must be a JSON array")
    pending = {}
    for item in raw:
        entry = inbox_from_json(item)
        if entry.key in pending:
            raise ValueError(f"inbox entry {entry.key!r} appears twice")
        pending[entry.key] = entry
    done = _object(data, "inbox_done")
    if not all(is_num(at) for at in done.values()):
        raise ValueError("inbox_done must map keys to times")
    return pending, {k: float(at) for k, at in done.items()}


def _object(state: Any, name: str) -> dict[str, Any]:
    value = state.get(name, {}) if isinstance(state, dict) else None
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object")
    return value


def _dumps(value: Any) -> bytes:
    """The seed's layout: indent=2 and raw UTF-8 (umlauts stay readable)."""
    return json.dumps(value, indent=2, ensure_ascii=False).encode("utf-8")
