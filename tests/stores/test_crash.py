"""SIGKILL a process mid-stream of commits: every acknowledged exchange survives,
and so does every inbox entry whose add returned, done exactly with its exchange."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from chatbridge.core.models import Usage
from tests.stores import crash_child
from tests.stores.helpers import inbox_entry, opened, snapshot, store_path

ROOT = Path(__file__).resolve().parents[3]
# JSON rewrites two files with four fsyncs per commit (~30 ms here), so it gets fewer.
ACKS_BEFORE_KILL = {"sqlite": 300, "json": 100}


async def _run_and_kill(backend: str, path: Path, mode: str = "commit") -> int:
    """Start the child, kill it after some acks; return the last ack it printed."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.stores.crash_child",
        backend,
        str(path),
        mode,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    acks: list[int] = []
    try:
        while len(acks) < ACKS_BEFORE_KILL[backend]:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=10)
            if not line:
                raise AssertionError((await proc.stderr.read()).decode())
            acks.append(int(line))
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    # Lines still in the pipe were acknowledged too; the last one may be cut off.
    rest = (await proc.stdout.read()).decode().split("\n")
    acks += [int(x) for x in rest[:-1]]
    assert acks == list(range(len(acks)))
    return acks[-1]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "json"])
async def test_acknowledged_exchanges_survive_sigkill(backend: str, tmp_path: Path) -> None:
    path = store_path(backend, tmp_path)
    last = await _run_and_kill(backend, path)

    store = await opened(backend, path, max_entries=crash_child.MAX_ENTRIES)  # opens cleanly
    try:
        entries = await store.ring(crash_child.USER, since=-1)
        seqs = [int(e.user_message.split()[1]) for e in entries]
        # Everything acknowledged, in order; at most the one in flight beyond it.
        assert seqs[: last + 1] == list(range(last + 1))
        assert len(seqs) in (last + 1, last + 2)
        assert seqs == list(range(len(seqs)))
        # Atomicity: session and usage were committed with exactly those entries.
        for seq in (0, last // 2, *seqs[-2:]):
            session = await store.load_session(f"conv-{seq}")
            assert session is not None
            assert session.turns[0].content == f"seq {seq}"
        assert await store.load_session(f"conv-{len(seqs)}") is None
        assert await store.usage(crash_child.USER, day="2025-04-05") == Usage(
            len(seqs), 2 * len(seqs)
        )
    finally:
        await store.aclose()
    # A killed write's temp file was cleaned up; SQLite left no -wal or -shm behind.
    expected = {path.name} if backend == "sqlite" else {path.name, f"{path.name}.state.json"}
    assert set(snapshot(path.parent)) == expected


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "json"])
async def test_acknowledged_inbox_entries_survive_sigkill(backend: str, tmp_path: Path) -> None:
    path = store_path(backend, tmp_path)
    last = await _run_and_kill(backend, path, "inbox")

    store = await opened(backend, path, max_entries=crash_child.MAX_ENTRIES)
    try:
        pending = {int(e.key.partition(":")[2]): e for e in await store.inbox_pending()}
        ring = {
            int(e.user_message.split()[1]) for e in await store.ring(crash_child.USER, since=-1)
        }
        evens = set(range(0, last + 1, 2))
        assert evens <= set(pending)  # every acknowledged add is there, intact
        assert set(pending) - evens <= {last + 1}  # at most the one in flight beyond
        assert all(pending[s].message.text == f"seq {s}" for s in pending)
        # Done exactly with its exchange: never both in the ring and pending.
        odds = set(range(1, last + 1, 2))
        assert odds <= ring
        assert not ring & set(pending)
        assert ring - odds <= {last + 1}
        for seq in (1, last if last % 2 else last - 1):  # done markers refuse redeliveries
            again = inbox_entry(crash_child.inbox_key(seq), at=float(seq))
            assert await store.inbox_add(again) is False
    finally:
        await store.aclose()
