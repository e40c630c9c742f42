"""`chatbridge run` as a child process for a scenario: started, then SIGTERM'd."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.cli import CHATBRIDGE, clean_env


@dataclass
class Ran:
    """What the child left: its exit code and stderr, filled in after it stopped."""

    code: int | None = None
    stderr: str = ""
    process: asyncio.subprocess.Process | None = field(default=None, repr=False)


@contextlib.asynccontextmanager
async def chatbridge_run(cwd: Path, env: Mapping[str, str]) -> AsyncIterator[Ran]:
    """`chatbridge run` in `cwd` until the block ends; then SIGTERM and wait."""
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", cwd=cwd, env=clean_env(env),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    ran = Ran(process=process)
    try:
        yield ran
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        try:
            _, err = await asyncio.wait_for(process.communicate(), 30)
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        ran.code, ran.stderr = process.returncode, err.decode() if err else ""
