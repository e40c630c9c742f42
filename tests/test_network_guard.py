"""The loopback-only guard holds in the test process and in every Python child.

A test that reaches past this machine fails at once (`tests/conftest.py`), and
so does a `chatbridge` (or any Python) child it starts: their PYTHONPATH holds
`tests/support/child_site`, whose `sitecustomize` installs the same guard.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import pytest

from tests.support.cli import clean_env, free_port, run_cli
from tests.support.fake_telegram import FakeTelegram
from tests.support.network_guard import MESSAGE
from tests.support.run_config import write_run_config

OUTSIDE = "203.0.113.7"  # TEST-NET-3 (documentation); refused before any packet is sent
NAME = "chatbridge.invalid"  # a name the guard must not even look up


async def _python(code: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode(), err.decode()


def test_the_test_process_cannot_reach_another_address() -> None:
    with pytest.raises(ConnectionRefusedError, match=MESSAGE):
        socket.create_connection((OUTSIDE, 9), timeout=5)
    with pytest.raises(socket.gaierror, match="DNS"):
        socket.getaddrinfo(NAME, 443)


@pytest.mark.parametrize("env", ["clean_env", "inherited"])
async def test_a_child_cannot_reach_another_address_nor_resolve_a_name(env: str) -> None:
    environ = clean_env() if env == "clean_env" else dict(os.environ)
    code = (
        "import socket\n"
        f"try: socket.create_connection(({OUTSIDE!r}, 9), timeout=5)\n"
        "except ConnectionRefusedError as e: print('connect:', e)\n"
        f"try: socket.getaddrinfo({NAME!r}, 443)\n"
        "except socket.gaierror as e: print('dns:', e)\n"
    )
    code_, out, err = await _python(code, environ)
    assert code_ == 0, err
    assert f"connect: {MESSAGE} ('{OUTSIDE}', 9)" in out
    assert f"dns: [Errno {socket.EAI_NONAME}] {MESSAGE} {NAME!r} (DNS)" in out


async def test_a_child_still_reaches_loopback() -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        code = (
            f"import socket; socket.create_connection(('127.0.0.1', {port})).close(); print('ok')"
        )
        code_, out, err = await _python(code, clean_env())
    assert (code_, out.strip()) == (0, "ok"), err


async def test_chatbridge_run_pointed_past_loopback_is_stopped_by_the_guard(
    tmp_path: Path,
) -> None:
    """0.0.0.0 is not a loopback address, yet on Linux a connect to it reaches
    this machine: unguarded, the child would reach the fake and serve."""
    async with FakeTelegram() as telegram:
        base_url = telegram.base_url.replace("127.0.0.1", "0.0.0.0")
        write_run_config(tmp_path, port=free_port(), telegram=base_url, debug=True, allow=())
        result = await run_cli("run", cwd=tmp_path, env={"TELEGRAM_BOT_TOKEN": telegram.token})
        assert telegram.calls == [], "the child reached the fake through 0.0.0.0"
    assert result.code == 1, result.stderr
    assert "telegram could not start" in result.stderr
