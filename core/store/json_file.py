"""The JSON store: the seed's file format, for small installs and migration."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.models import Exchange, MemoryEntry, Session, Usage
from core.store._codec import (
    copy_session,
    corrupt,
    dumps,
    entry_from_json,
    entry_to_json,
    fsync_dir,
    session_from_json,
    session_to_json,
    unreadable,
)
from core.store.base import StoreError


class JsonStore:
    """Everything in memory; every write rewrites the files (O(total size) per commit).

    Files: `path` is the ring, a flat JSON array of entries for all users,
    exactly the seed's format plus `user` and `scope` (old entries are migrated
    on load, see `entry_from_json`; the file is rewritten on the next write).
    `<path>.state.json` holds `{"sessions", "usage", "last_entry"}`.

    Atomicity across two files: a commit writes the state file first, and it
    carries the new entry as `last_entry`; that write is the commit point. If
    the process dies before the ring file is rewritten, `open()` finds
    `last_entry` missing from the ring and appends it. `forget` also writes
    the state first, so a forgotten user's entry can never be replayed.

    Each file write is temp file + fsync + `os.replace` + directory fsync, so
    a reader sees the old or the new file, never a torn one. Writes block the
    event loop (one fsync pair per commit); one process per file.
    """

    def __init__(self, path: Path, *, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._path = path
        self._state_path = path.with_name(f"{path.name}.state.json")
        self._max = max_entries
        self._ring: dict[str, list[MemoryEntry]] = {}
        self._sessions: dict[str, Session] = {}
        self._usage: dict[str, dict[str, Usage]] = {}
        self._last: MemoryEntry | None = None
        self._open = False

    async def open(self) -> None:
        """Load both files; a damaged one raises `StoreCorrupt` and is not touched."""
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise unreadable(self._path.parent, err) from err
        entries = self._load_ring()
        self._load_state()
        for entry in entries:
            self._ring.setdefault(entry.user, []).append(entry)
        for f in (self._path.parent, self._path, self._state_path):
            if f.exists() and not os.access(f, os.W_OK):
                raise unreadable(f, PermissionError(13, "Permission denied"))
        for stale in self._path.parent.glob(f".{self._path.name}*.tmp"):
            stale.unlink()  # a write killed midway; it may hold text forget() must not miss
        last = self._last
        if last is not None and self._ring.get(last.user, [None])[-1] != last:
            self._ring.setdefault(last.user, []).append(last)
            self._write_ring()
        self._open = True

    async def load_session(self, key: str) -> Session | None:
        session = self._check()._sessions.get(key)
        return None if session is None else copy_session(session, key)

    async def save_session(self, session: Session | None, *, key: str) -> None:
        before = self._check()._sessions.get(key)
        _put(self._sessions, key, None if session is None else copy_session(session, key))
        try:
            self._write_state()
        except StoreError:
            _put(self._sessions, key, before)
            raise

    async def commit_exchange(self, exchange: Exchange) -> None:
        """Session, ring entry (filed under `ring_user`), usage and trim, committed at once."""
        user, key, day = exchange.ring_user, exchange.session.key, exchange.day
        days = self._check()._usage.setdefault(user, {})
        before = (self._ring.get(user), self._sessions.get(key), days.get(day), self._last)
        entry = replace(exchange.entry, user=user)
        self._ring[user] = [*self._ring.get(user, []), entry][-self._max :]
        self._sessions[key] = copy_session(exchange.session, key)
        days[day] = days.get(day, Usage()) + exchange.usage
        self._last = entry
        try:
            self._write_state()
        except StoreError:
            _put(self._ring, user, before[0])
            _put(self._sessions, key, before[1])
            _put(days, day, before[2])
            self._last = before[3]
            raise
        self._write_ring()  # if this fails the exchange is still committed (see class doc)

    async def ring(self, user: str, *, since: float) -> list[MemoryEntry]:
        """Entries newer than `since`, oldest first; user "" (unknown owner) gets none."""
        if not user:
            return []
        return [e for e in self._check()._ring.get(user, []) if e.timestamp > since][-self._max :]

    async def forget(self, user: str) -> None:
        """Drop the user everywhere and rewrite both files; the old files are unlinked."""
        self._check()._sessions = {k: s for k, s in self._sessions.items() if s.user != user}
        self._usage.pop(user, None)
        self._ring.pop(user, None)
        if self._last is not None and self._last.user == user:
            self._last = None
        self._write_state()
        self._write_ring()

    async def usage(self, user: str, *, day: str) -> Usage:
        return self._check()._usage.get(user, {}).get(day, Usage())

    async def aclose(self) -> None:
        """Every write is already on disk; this only refuses further use."""
        self._open = False

    def _check(self) -> JsonStore:
        if not self._open:
            raise StoreError(f"{self._path} is not open")
        return self

    def _load_ring(self) -> list[MemoryEntry]:
        raw = _read(self._path)
        if raw is None:
            return []
        data = _parse(self._path, raw)
        if not isinstance(data, list):
            raise corrupt(self._path, "JSON", "expected a JSON array of entries")
        entries = []
        for index, item in enumerate(data):
            try:
                entries.append(entry_from_json(item))
            except ValueError as err:
                raise corrupt(self._path, "JSON", f"entry {index}: {err}") from err
        return entries

    def _load_state(self) -> None:
        raw = _read(self._state_path)
        if raw is None:
            return
        data = _parse(self._state_path, raw)
        try:
            if not isinstance(data, dict):
                raise ValueError("expected a JSON object")
            sessions, usage = data.get("sessions", {}), data.get("usage", {})
            self._sessions = {k: session_from_json(k, v) for k, v in sessions.items()}
            self._usage = {
                user: {day: Usage(int(u["input_tokens"]), int(u["output_tokens"]))
                       for day, u in days.items()}
                for user, days in usage.items()
            }
            last = data.get("last_entry")
            self._last = None if last is None else entry_from_json(last)
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise corrupt(self._state_path, "JSON", f"malformed state: {err}") from err

    def _write_ring(self) -> None:
        entries = [entry_to_json(e) for entries in self._ring.values() for e in entries]
        _atomic_write(self._path, dumps(entries))

    def _write_state(self) -> None:
        usage = {
            user: {day: {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens}
                   for day, u in days.items()}
            for user, days in self._usage.items() if days
        }
        _atomic_write(self._state_path, dumps({
            "sessions": {k: session_to_json(s) for k, s in self._sessions.items()},
            "usage": usage,
            "last_entry": None if self._last is None else entry_to_json(self._last),
        }))


def _put(d: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        d.pop(key, None)
    else:
        d[key] = value


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise unreadable(path, err) from err


def _parse(path: Path, raw: bytes) -> Any:
    if not raw.strip():
        raise corrupt(path, "JSON", "file is empty")
    try:
        return json.loads(raw)
    except ValueError as err:  # includes UnicodeDecodeError
        raise corrupt(path, "JSON", f"invalid JSON: {err}") from err


def _atomic_write(path: Path, data: bytes) -> None:
    """Old or new file, never a torn one; mode 0600 because it holds private text."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
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
