"""The JSON backend's file format: seed compatibility, migration, atomic writes."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from chatbridge.core.models import MemoryEntry
from chatbridge.core.ports.store import StoreError
from chatbridge.stores.json import JsonStore
from tests.stores.helpers import exchange, snapshot
from tests.support.closing import Closing

SEED = (
    '[{"timestamp": 1743854580.0, "user_message": "Check wo das Chemitek-Paket bleibt", '
    '"assistant_summary": "UPS Tracking 1Z999AA10123456784 — Status: In Transit.\\n'
    'Voraussichtliche Zustellung: Mittwoch, 09.04.", "session_name": "telegram_579304651", '
    '"workdir": "/opt/claude-telegram-bridge"}]'
)
SEED_ENTRY = MemoryEntry(
    timestamp=1743854580.0,
    user_message="Check wo das Chemitek-Paket bleibt",
    assistant_summary="UPS Tracking 1Z999AA10123456784 — Status: In Transit.\n"
    "Voraussichtliche Zustellung: Mittwoch, 09.04.",
    session_name="telegram_579304651",
    workdir="/opt/claude-telegram-bridge",
    user="telegram:579304651",
    scope="private",
)


async def _open(path: Path, max_entries: int = 5) -> JsonStore:
    store = JsonStore(path, max_entries=max_entries)
    await store.open()
    return store


async def test_seed_file_is_migrated_on_load(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    path.write_text(SEED, encoding="utf-8")
    before = snapshot(tmp_path)

    store = await _open(path)
    assert await store.ring("telegram:579304651", since=0) == [SEED_ENTRY]
    assert snapshot(tmp_path) == before  # reading never rewrites

    await store.commit_exchange(exchange("new", user="discord:7", ts=1743854600.0))
    await store.aclose()
    written = path.read_text(encoding="utf-8")
    assert "—" in written  # ensure_ascii=False, like the seed
    assert "\\u2014" not in written
    assert written.startswith('[\n  {\n    "timestamp": 1743854580.0,')  # indent=2
    data = json.loads(written)
    assert data[0] == {**json.loads(SEED)[0], "user": "telegram:579304651", "scope": "private"}
    assert [d["user"] for d in data] == ["telegram:579304651", "discord:7"]

    again = await _open(path)
    assert await again.ring("telegram:579304651", since=0) == [SEED_ENTRY]


async def test_unknown_owner_is_kept_but_never_shown(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    odd = [
        {"timestamp": 1.0, "user_message": "a", "assistant_summary": "b", "session_name": n}
        for n in ("default", "Telegram_1", "telegram_", "_123")
    ]
    path.write_text(json.dumps(odd), encoding="utf-8")
    store = await _open(path)
    assert await store.ring("", since=0) == []
    for user in ("default", "telegram:", "Telegram:1", ":123"):
        assert await store.ring(user, since=0) == []

    await store.commit_exchange(exchange("x"))
    kept = json.loads(path.read_text(encoding="utf-8"))
    assert [(e["session_name"], e["user"]) for e in kept[:4]] == [
        ("default", ""),
        ("Telegram_1", ""),
        ("telegram_", ""),
        ("_123", ""),
    ]  # not silently dropped: an operator can still move them by hand


async def test_writes_are_atomic_and_private(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    (tmp_path / ".memory.json.4242.tmp").write_text("[half a write", encoding="utf-8")
    store = await _open(path)
    for i in range(3):
        await store.commit_exchange(exchange(f"m{i}", ts=float(i)))
    assert sorted(snapshot(tmp_path)) == ["memory.json", "memory.json.state.json"]
    for name in ("memory.json", "memory.json.state.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
    state = json.loads((tmp_path / "memory.json.state.json").read_text(encoding="utf-8"))
    assert set(state) == {
        "sessions", "usage", "last_entry", "forgotten", "inbox", "inbox_done", "cursors",
    }  # fmt: skip
    assert state["forgotten"] == {}
    assert (state["inbox"], state["inbox_done"]) == ([], {})
    usage = {"2025-04-05": {"input_tokens": 9, "output_tokens": 15}}
    assert state["usage"] == {"telegram:1": usage}


async def test_commit_point_is_the_state_file(tmp_path: Path) -> None:
    """Killed after the state write, before the ring write: the entry is replayed."""
    path = tmp_path / "memory.json"
    store = await _open(path)
    await store.commit_exchange(exchange("first", ts=1.0))
    ring_before_second = path.read_bytes()
    await store.commit_exchange(exchange("second", ts=2.0))
    await store.aclose()
    path.write_bytes(ring_before_second)  # as if the ring rewrite never happened

    again = await _open(path)
    assert [e.user_message for e in await again.ring("telegram:1", since=0)] == [
        "first",
        "second",
    ]
    assert [e["user_message"] for e in json.loads(path.read_bytes())] == ["first", "second"]


async def test_a_second_process_is_refused_and_the_first_keeps_working(
    tmp_path: Path, closing: Closing
) -> None:
    path = tmp_path / "memory.json"
    first = JsonStore(path, max_entries=5)
    await first.open()
    try:
        with pytest.raises(StoreError, match="in use by another chatbridge process"):
            await JsonStore(path, max_entries=5).open()
        await first.commit_exchange(exchange("weiter"))
        assert [e.user_message for e in await first.ring("telegram:1", since=0)] == ["weiter"]
    finally:
        await first.aclose()
    second = JsonStore(path, max_entries=5)  # free again once the first closed
    await second.open()
    closing(second)
    assert [e.user_message for e in await second.ring("telegram:1", since=0)] == ["weiter"]
