"""Run the real `chatbridge` console script in a child process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support.network_guard import child_pythonpath
from tests.support.paths import REPO

# `python -m chatbridge` runs `core/app/cli.py`; going through the interpreter
# avoids depending on where pip put the console script.
CHATBRIDGE = [sys.executable, "-m", "chatbridge"]


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The parent's environment without API keys or config overrides; the
    child runs under the loopback-only network guard (its PYTHONPATH holds
    `tests/support/child_site`, whose sitecustomize installs it)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("CHATBRIDGE_")
    }
    env["PYTHONPATH"] = child_pythonpath(REPO)
    env.update(extra or {})
    return env


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


async def run_cli(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, stdin: str = ""
) -> Result:
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE,
        *args,
        cwd=cwd,
        env=clean_env(env),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), 60)
    return Result(process.returncode or 0, out.decode(), err.decode())


@contextlib.contextmanager
def _ctrl_c_as_at_a_terminal() -> Iterator[None]:
    """A child started inside gets Ctrl-C's default action, as at a terminal.

    A shell that starts the suite in the background (`pytest &`, nohup) sets
    SIGINT to "ignore", and an ignored signal stays ignored through exec: the
    chat under test would never see the Ctrl-C a test sends it. A *handled*
    signal is reset to its default at exec, so handle it while the child starts."""
    before = signal.getsignal(signal.SIGINT)
    if before is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if before is signal.SIG_IGN:
            signal.signal(signal.SIGINT, before)


class ChatSession:
    """An interactive `chatbridge chat` driven line by line, as a person would."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.transcript = ""

    @classmethod
    async def start(
        cls, *args: str, cwd: Path, env: Mapping[str, str] | None = None
    ) -> ChatSession:
        with _ctrl_c_as_at_a_terminal():
            process = await asyncio.create_subprocess_exec(
                *CHATBRIDGE,
                "chat",
                *args,
                cwd=cwd,
                env=clean_env(env),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        return cls(process)

    async def read_until(self, marker: str, within: float = 20.0) -> str:
        """Read stdout until `marker` has appeared; returns the text read."""
        assert self.process.stdout is not None
        chunk = ""

        async def read() -> None:
            nonlocal chunk
            while marker not in chunk:
                line = await self.process.stdout.readline()  # type: ignore[union-attr]
                if not line:
                    raise AssertionError(f"chat exited before {marker!r}; got {chunk!r}")
                chunk += line.decode()

        await asyncio.wait_for(read(), within)
        self.transcript += chunk
        return chunk

    async def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{line}\n".encode())
        await self.process.stdin.drain()

    async def close(self) -> tuple[int, str, str]:
        """Ctrl-D; returns exit code, the rest of stdout, and stderr."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        out, err = await asyncio.wait_for(self.process.communicate(), 20)
        self.transcript += out.decode()
        return self.process.returncode or 0, out.decode(), err.decode()


def free_port() -> int:
    """A loopback port nobody listens on right now (for `server.port`)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def serve_until(
    cwd: Path, env: Mapping[str, str], answered: Callable[[], Awaitable[object]]
) -> tuple[int, str]:
    """`chatbridge run` in `cwd` until `answered()` returns, then SIGTERM;
    returns its exit code and stderr (the child is killed if anything fails)."""
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", cwd=cwd, env=dict(env),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        await answered()
        process.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    assert process.returncode is not None  # communicate() waited for the exit
    return process.returncode, err.decode()
