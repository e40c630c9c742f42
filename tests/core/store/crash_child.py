"""Child process for test_crash: commit forever, acknowledging each commit on stdout.

Usage: python -m tests.core.store.crash_child BACKEND PATH

Exchange `n` has session key `conv-n`, ring entry "seq n" and usage (1, 2), all
for one user; the line `n` is printed (and flushed) only after
`commit_exchange` returned, so every printed number must survive a SIGKILL.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from pathlib import Path

from core.store import open_store
from tests.core.store.helpers import exchange

USER = "telegram:42"
MAX_ENTRIES = 100_000  # never trims during the test: every exchange stays checkable


async def main(backend: str, path: Path) -> None:
    store = await open_store(backend=backend, path=path, url="", max_entries=MAX_ENTRIES)
    for seq in itertools.count():
        ex = exchange(f"seq {seq}", user=USER, ts=float(seq), key=f"conv-{seq}", tokens=(1, 2))
        await store.commit_exchange(ex)
        sys.stdout.write(f"{seq}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
