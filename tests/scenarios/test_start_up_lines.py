"""`chatbridge run` on Discord and Slack tells the truth in its log, and nothing else.

One run with both platforms (Socket Mode) and `server.port: 0`: the serving
line names the port the OS picked (and `/readyz` answers there), no library
warning that does not concern a text bot shows (discord.py's voice libraries,
bolt's "token will be unused", which $SLACK_BOT_TOKEN in the environment
causes), and the handled conditions a running bot meets (a gateway
connection cut and resumed, a malformed request on the HTTP port) are at most
WARNING or INFO lines while every message is still answered: no ERROR, no
traceback. (discord.py's reconnect ERROR needs a refused reconnect, which the
fake cannot stage: `tests/core/test_library_logs.py` covers that rule.)
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
from pathlib import Path

import aiohttp
import pytest

from tests.support import fake_slack_events as ev
from tests.support.cli import CHATBRIDGE, clean_env
from tests.support.fake_discord import USER_ID, FakeDiscord
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.support.run_config import run_config_text

pytestmark = pytest.mark.timeout(90)

SERVING = re.compile(r"serving discord, slack with provider .* on 127\.0\.0\.1:(\d+)")


def _config(discord: FakeDiscord, slack: FakeSlack, openai: FakeOpenAI) -> str:
    return run_config_text(
        port=0,
        openai=openai.base_url,
        allow=(f"discord:{USER_ID}", f"slack:{ev.USER_ID}"),
        providers={"main": {"api_key": "${OPENAI_API_KEY}"}},
        platforms={
            "discord": {
                "enabled": True,
                "api_base": discord.api_base,
                "gateway_url": discord.gateway_url,
            },
            "slack": {
                "enabled": True,
                "bot_token": "${SLACK_BOT_TOKEN}",
                "app_token": "${SLACK_APP_TOKEN}",
                "base_url": slack.base_url,
            },
        },
    )


class _Lines:
    """stderr of the child, read as it comes (so the pipe never fills)."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.lines: list[str] = []
        self._task = asyncio.create_task(self._read(stream))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self.lines.append(line.decode(errors="replace").rstrip("\n"))

    async def first(self, pattern: re.Pattern[str], within: float = 40.0) -> re.Match[str]:
        async def scan() -> re.Match[str]:
            seen = 0
            while True:
                for line in self.lines[seen:]:
                    if match := pattern.search(line):
                        return match
                seen = len(self.lines)
                if self._task.done():
                    raise AssertionError("run exited:\n" + "\n".join(self.lines))
                await asyncio.sleep(0.05)

        try:
            return await asyncio.wait_for(scan(), within)
        except TimeoutError:
            raise AssertionError(f"no {pattern.pattern!r} in:\n" + "\n".join(self.lines)) from None

    async def rest(self) -> str:
        await self._task
        return "\n".join(self.lines)


async def _malformed_request(port: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
    await writer.drain()
    status = await reader.readline()
    writer.close()
    return status


async def test_run_on_discord_and_slack_logs_only_what_concerns_a_text_bot(
    tmp_path: Path,
) -> None:
    async with (
        FakeDiscord() as discord,
        FakeSlack() as slack,
        FakeOpenAI(default_text="Hallo zurück") as openai,
    ):
        (tmp_path / "chatbridge.yaml").write_text(_config(discord, slack, openai))
        env = clean_env(
            {
                "DISCORD_BOT_TOKEN": discord.token,
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "SLACK_APP_TOKEN": APP_TOKEN,
                "OPENAI_API_KEY": "sk-start-up-lines",
            }
        )
        process = await asyncio.create_subprocess_exec(
            *CHATBRIDGE, "run", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            assert process.stderr is not None
            log = _Lines(process.stderr)
            port = int((await log.first(SERVING)).group(1))
            assert port != 0
            async with aiohttp.ClientSession() as http:
                async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                    assert response.status == 200, await response.text()

            # The gateway connection cut: discord.py resumes by itself.
            resumes = discord.resume_count
            await discord.drop_connection()
            await discord.wait_for(lambda: discord.resume_count > resumes, within=30)
            await discord.send_dm("Hallo?")
            dm = discord.dm_channel()
            await discord.wait_for(lambda: discord.bot_texts(dm) == ["Hallo zurück"], within=20)
            await slack.socket_event(ev.dm_message("Hallo Slack?"))
            await slack.wait_for(lambda: "Hallo zurück" in slack.bot_texts(ev.DM_CHANNEL), 20)

            status = await _malformed_request(port)
            assert b" 400 " in status, status
            await log.first(re.compile(r"INFO aiohttp\.server: Error handling request"))

            process.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(process.wait(), 30) == 0
            stderr = await asyncio.wait_for(log.rest(), 10)
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()

    for noise in ("PyNaCl", "davey", "will be unused", "Traceback"):
        assert noise not in stderr, f"{noise!r} in the log:\n{stderr}"
    assert " ERROR " not in stderr, stderr
