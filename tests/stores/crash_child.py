"""Child process for test_crash: write forever, acknowledging each write on stdout.

Usage: python -m tests.stores.crash_child BACKEND PATH [MODE]

MODE "commit" (the default): exchange `n` has session key `conv-n`, ring entry
"seq n" and usage (1, 2), all for one user; the line `n` is printed (and
flushed) only after `commit_exchange` returned, so every printed number must
survive a SIGKILL.

MODE "inbox": `n` first adds the inbox entry `telegram:n` ("seq n"); an odd `n`
then commits exchange `n` with that entry as its `inbox_key`, which marks it
done. The line `n` is printed after both returned: even entries stay pending,
odd ones are done exactly when their ring entry exists.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from dataclasses import replace
from pathlib import Path

from chatbridge.core.ports.store import StoreSettings
from chatbridge.stores import open_store
from tests.stores.helpers import exchange, inbox_entry

USER = "telegram:42"
MAX_ENTRIES = 100_000  # never trims during the test: every exchange stays checkable


def inbox_key(seq: int) -> str:
    return f"telegram:{seq}"


async def main(backend: str, path: Path, mode: str) -> None:
    store = await open_store(
        StoreSettings(backend=backend, path=path, url="", max_entries=MAX_ENTRIES)
    )
    for seq in itertools.count():
        ex = exchange(f"seq {seq}", user=USER, ts=float(seq), key=f"conv-{seq}", tokens=(1, 2))
        if mode == "inbox":
            if not await store.inbox_add(inbox_entry(inbox_key(seq), f"seq {seq}", at=float(seq))):
                raise SystemExit(f"inbox_add({seq}) was refused")
            if seq % 2:
                await store.commit_exchange(replace(ex, inbox_key=inbox_key(seq)))
        else:
            await store.commit_exchange(ex)
        sys.stdout.write(f"{seq}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    mode = sys.argv[3] if len(sys.argv) > 3 else "commit"
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), mode))
