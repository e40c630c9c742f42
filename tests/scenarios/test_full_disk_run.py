"""Issue 17.2 with a real full disk: `chatbridge run` and `chatbridge chat` as users meet it.

Two ways to fill a disk without faking SQLite: a file-size limit on the
child process (`RLIMIT_FSIZE`, needs no privileges: every write past it
fails, as on a full disk) for the first start, and a small tmpfs for the
running bot (mounting needs root; those tests are skipped elsewhere, the
SQLITE_FULL path itself is covered in tests/platforms/telegram/test_full_store_intake.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from chatbridge.core.texts import say
from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_telegram import FakeTelegram
from tests.support.people import ALICE
from tests.support.run_config import write_run_config
from tests.support.small_disk import small_tmpfs

pytestmark = pytest.mark.slow


def _small_files(limit: int) -> None:
    """In the child: every file write past `limit` bytes fails (EFBIG), like a full disk."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the error, not the signal's kill
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if ".tmp" in p.name)


async def test_a_first_start_that_cannot_write_leaves_no_file_behind(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "chat", cwd=tmp_path, env=clean_env(),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, preexec_fn=lambda: _small_files(8192),
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(b"Hallo\n"), 60)
    stderr = err.decode()
    assert process.returncode == 1, (out, stderr)
    assert "Traceback" not in stderr
    assert stderr.count("\n") == 1, stderr  # one sentence naming the file
    assert "chatbridge.db" in stderr
    data = tmp_path / "data"
    assert _leftovers(tmp_path) == []
    assert not (data / "chatbridge.db").exists()


# -- a real full filesystem ----------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (needs root and mount permission, else the test is skipped)."""
    with small_tmpfs(tmp_path, "1m") as mount:
        yield mount


def _fill(disk: Path) -> Path:
    """A filler file taking every free byte of `disk`."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(OSError):  # ENOSPC: the disk is full
            while os.write(fd, b"\0" * 4096):
                pass
    finally:
        os.close(fd)
    return filler


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def _readyz(port: int) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/readyz") as response,
    ):
        return response.status, (await response.json())["status"]


async def _until(check: object, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not await check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not met")
        await asyncio.sleep(0.05)


async def test_a_full_disk_while_serving_tells_the_user_and_readyz_until_space_is_back(
    tmp_path: Path, small_disk: Path
) -> None:
    port = free_port()
    async with FakeTelegram() as telegram:
        write_run_config(
            tmp_path,
            port=port,
            telegram=telegram.base_url,
            debug=True,
            platforms={"telegram": {"edit_interval": "0.1s"}},
            memory={"path": str(small_disk / "bot.db")},
        )
        process = await asyncio.create_subprocess_exec(
            *CHATBRIDGE, "run", cwd=tmp_path,
            env=clean_env({"TELEGRAM_BOT_TOKEN": telegram.token}),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            await _until(lambda: _ok(port))
            filler = _fill(small_disk)
            await _until(lambda: _says(port, "store refuses writes"))
            telegram.push_text(ALICE, ALICE, "Wo bleibt das Paket?")
            notice = say("de", "inbox_full")
            await telegram.wait_for(lambda: telegram.bot_texts(ALICE) == [notice], within=30)
            filler.unlink()  # space is back
            await _until(lambda: _ok(port))
            await telegram.wait_for(lambda: len(telegram.bot_texts(ALICE)) == 2, within=30)
            texts = telegram.bot_texts(ALICE)
            assert texts[0] == notice
            assert "Wo bleibt das Paket?" in texts[1]  # the debug provider's answer
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    assert "Traceback" not in err.decode()
    assert _leftovers(small_disk) == []


async def _ok(port: int) -> bool:
    try:
        return (await _readyz(port))[0] == 200
    except aiohttp.ClientError:
        return False


async def _says(port: int, reason: str) -> bool:
    return await _readyz(port) == (503, reason)


async def test_a_first_start_on_a_full_disk_leaves_no_file_behind(
    tmp_path: Path, small_disk: Path
) -> None:
    _fill(small_disk)
    (tmp_path / "chatbridge.yaml").write_text(f"memory: {{path: '{small_disk / 'first.db'}'}}\n")
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "chat", cwd=tmp_path, env=clean_env(),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(b"Hallo\n"), 60)
    assert process.returncode == 1, err.decode()
    assert "first.db" in err.decode()
    assert "Traceback" not in err.decode()
    assert _names(small_disk) == ["filler"]
