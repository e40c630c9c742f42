"""Reading, validating and atomically writing the JSON store's two files.

Readers raise `StoreCorrupt` naming the file for anything malformed and never
write; `atomic_write` leaves either the old or the new file, never a torn one.
One exception: a row holding bytes that are not UTF-8 (a ring entry, a
session or one of its turns, an inbox entry, a counter) is damaged, not
foreign. It is skipped and reported once, by file, part and position, never
by content, and the rest loads; the next write leaves it out of the file.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chatbridge.core.models import InboxEntry, MemoryEntry, Session, Usage
from chatbridge.core.ports.store import StoreError
from chatbridge.stores._codec import (
    corrupt,
    entry_from_json,
    entry_to_json,
    fsync_dir,
    inbox_from_json,
    inbox_to_json,
    is_num,
    session_from_json,
    session_to_json,
    undecodable,
    unreadable,
)

log = logging.getLogger(__name__)

Cursors = dict[str, dict[str, tuple[int, float]]]
"""Channel cursors: platform -> channel -> (newest handled message ID, wall time)."""


@dataclass(slots=True)
class State:
    """The sidecar: sessions by key, usage by user then day, the commit marker,
    `forget`'s tombstones (SHA-256 of the user ID → wall-clock time), the
    pending inbox entries by key in insertion order, the done markers
    (key → wall-clock time it was done; nothing else is kept of them) and the
    channel cursors (`{"discord": {"<channel>": [last_id, at]}}`)."""

    sessions: dict[str, Session] = field(default_factory=dict)
    usage: dict[str, dict[str, Usage]] = field(default_factory=dict)
    last_entry: MemoryEntry | None = None
    forgotten: dict[str, float] = field(default_factory=dict)
    inbox: dict[str, InboxEntry] = field(default_factory=dict)
    inbox_done: dict[str, float] = field(default_factory=dict)
    cursors: Cursors = field(default_factory=dict)


def read_ring(path: Path) -> list[MemoryEntry]:
    """The ring file's entries in file order; a missing file is an empty ring."""
    data = _read_json(path)
    if data is None:
        return []
    if not isinstance(data, list):
        raise corrupt(path, "JSON", "expected a JSON array of entries")
    entries = []
    for index, item in enumerate(data):
        if undecodable(item):
            _skip(path, "ring entry", index)
            continue
        try:
            entries.append(entry_from_json(item))
        except ValueError as err:
            raise corrupt(path, "JSON", f"entry {index}: {err}") from err
    return entries


def read_state(path: Path) -> State:
    data = _read_json(path)
    if data is None:
        return State()
    if isinstance(data, dict):
        data = _without_damaged(path, data)
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
            _cursors(data),
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
            "cursors": {
                platform: {channel: [last, at] for channel, (last, at) in channels.items()}
                for platform, channels in state.cursors.items()
                if channels
            },
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
    """The file's JSON; a byte that is not UTF-8 reads as a lone surrogate
    (`surrogateescape`), so only the row holding it is lost (`undecodable`)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise unreadable(path, err) from err
    if not raw.strip():
        raise corrupt(path, "JSON", "file is empty")
    try:
        return json.loads(raw.decode("utf-8", "surrogateescape"))
    except ValueError as err:
        raise corrupt(path, "JSON", f"invalid JSON: {_without_text(err)}") from err


def _without_text(err: ValueError) -> str:
    """A JSON error names a position, never the text around it."""
    if isinstance(err, json.JSONDecodeError):
        return f"{err.msg} at line {err.lineno} column {err.colno}"
    return type(err).__name__


def _without_damaged(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The state without the rows that hold undecodable bytes (each reported)."""
    data = dict(data)
    sessions = data.get("sessions")
    if isinstance(sessions, dict):
        kept = {}
        for index, (key, raw) in enumerate(sessions.items()):
            if isinstance(raw, dict) and isinstance(raw.get("turns"), list):
                turns = raw["turns"]
                good = [t for t in turns if not undecodable(t)]
                for n in range(len(turns) - len(good)):
                    _skip(path, f"turn of session {index}", n)
                raw = {**raw, "turns": good}
            if undecodable(key) or undecodable(raw):
                _skip(path, "session", index)
            else:
                kept[key] = raw
        data["sessions"] = kept
    for part in ("usage", "forgotten", "inbox_done", "cursors"):
        rows = data.get(part)
        if isinstance(rows, dict):
            bad = [k for k, v in rows.items() if undecodable(k) or undecodable(v)]
            for k in bad:
                _skip(path, part, list(rows).index(k))
            data[part] = {k: v for k, v in rows.items() if k not in bad}
    inbox = data.get("inbox")
    if isinstance(inbox, list):
        for index, item in enumerate(inbox):
            if undecodable(item):
                _skip(path, "inbox entry", index)
        data["inbox"] = [item for item in inbox if not undecodable(item)]
    if undecodable(data.get("last_entry")):
        _skip(path, "last_entry", 0)
        data["last_entry"] = None
    return data


def _skip(path: Path, part: str, index: int) -> None:
    log.warning(
        "%s: skipped damaged %s %s (it cannot be read; the rest loads without it)",
        path,
        part,
        index,
    )


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


def _cursors(data: dict[str, Any]) -> Cursors:
    """Absent in files written before cursors existed."""
    found: Cursors = {}
    for platform, channels in _object(data, "cursors").items():
        if not isinstance(channels, dict):
            raise ValueError("cursors must map platforms to channels")
        for channel, value in channels.items():
            ok = isinstance(value, list) and len(value) == 2
            if not ok or not isinstance(value[0], int) or not is_num(value[1]):
                raise ValueError("a cursor must be [message id, time]")
            found.setdefault(platform, {})[channel] = (value[0], float(value[1]))
    return found


def _object(state: Any, name: str) -> dict[str, Any]:
    value = state.get(name, {}) if isinstance(state, dict) else None
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object")
    return value


def _dumps(value: Any) -> bytes:
    """The seed's layout: indent=2 and raw UTF-8 (umlauts stay readable)."""
    return json.dumps(value, indent=2, ensure_ascii=False).encode("utf-8")


def put(d: dict[str, Any], key: str, value: Any) -> None:
    """Set, or remove when `value` is None (undoing an insert)."""
    if value is None:
        d.pop(key, None)
    else:
        d[key] = value
