"""What every platform's run of the seed's story (`tests/scenarios/test_chemitek_*.py`)
checks at its end: the user's memory as an admin sees it, and a clean stop.

The story is told by `chatbridge run` in a child process with piped output;
these read its SQLite store and stop it the way an admin would.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support import inbox_file
from tests.support.cli import run_cli

__all__ = ["Stopped", "remembered", "stopped"]

Waiter = Callable[..., Awaitable[None]]


async def remembered(home: Path, env: Mapping[str, str], user: str, wait_for: Waiter) -> list[str]:
    """The user messages `chatbridge memory show --user <user>` lists, asked
    while the bot keeps serving from `home`, once its store has nothing
    pending: an exchange's ring entry is committed with its inbox entry's
    done mark, so the last one is in. `wait_for` is a fake's."""
    db = home / "data" / "chatbridge.db"
    await wait_for(lambda: inbox_file.pending(db) == 0, within=30)
    shown = await run_cli("memory", "show", "--user", user, cwd=home, env=env)
    assert shown.code == 0, shown.stderr
    return [entry["user_message"] for entry in json.loads(shown.stdout)]


@dataclass(frozen=True, slots=True)
class Stopped:
    """A stopped `chatbridge run`: its exit code and what it wrote."""

    code: int | None
    stdout: str
    stderr: str

    def assert_clean(self, *secrets: str) -> None:
        """Exit 0, no traceback, and none of `secrets` (the bot token, the
        API key) anywhere in its output."""
        assert self.code == 0, self.stderr
        assert "Traceback" not in self.stderr
        for secret in secrets:
            assert secret not in self.stderr + self.stdout, "a secret leaked into the logs"


async def stopped(process: asyncio.subprocess.Process) -> Stopped:
    """SIGTERM `process` (started with piped stdout and stderr) and wait up
    to 20 s for it to exit."""
    process.send_signal(signal.SIGTERM)
    out, err = await asyncio.wait_for(process.communicate(), 20)
    return Stopped(process.returncode, out.decode(), err.decode())
