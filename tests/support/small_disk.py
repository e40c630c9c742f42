"""A real full filesystem for a test: a small tmpfs, no faked SQLite or OS calls.

Mounting needs root and mount permission; where either is missing the test
is skipped (CI runs as root, so there it runs).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["small_tmpfs"]


@contextlib.contextmanager
def small_tmpfs(parent: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's spelling: "256k", "1m") at `parent/disk`,
    readable only by us; unmounted (lazily, should a file still be open)
    when the block ends."""
    mount = parent / "disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.decode().strip()})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
