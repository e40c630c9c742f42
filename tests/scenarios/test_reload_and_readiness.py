"""SIGHUP reload and `/readyz` through a real `chatbridge run`."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest

from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.sse import Reply

pytestmark = pytest.mark.slow

ALICE = 579304651


def _config(telegram: FakeTelegram, openai: FakeOpenAI, port: int, prompt: str) -> str:
    return f"""
bot:
  system_prompt: "{prompt}"
engine:
  shutdown_grace: 5s
providers:
  main: {{type: openai, model: gpt-test, api_key: sk-test, base_url: "{openai.base_url}"}}
platforms:
  telegram: {{enabled: true, token: "{telegram.token}", base_url: "{telegram.base_url}"}}
access:
  allow: [telegram:{ALICE}]
server:
  port: {port}
"""


async def _status(url: str) -> int:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status


async def _wait_status(url: str, wanted: int, within: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            if await _status(url) == wanted:
                return
        except aiohttp.ClientError:
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{url} never answered {wanted}")
        await asyncio.sleep(0.05)


async def _ask(telegram: FakeTelegram, openai: FakeOpenAI, text: str) -> str:
    """Send `text`; returns the system prompt of the request it caused."""
    before = len(openai.requests)
    telegram.push_text(ALICE, ALICE, text)
    await telegram.wait_for(lambda: len(openai.requests) > before, within=15)
    await telegram.wait_for(lambda: len(telegram.bot_texts(ALICE)) > before, within=15)
    system = openai.requests[-1].body["messages"][0]
    assert system["role"] == "system"
    return str(system["content"])


async def test_sighup_swaps_a_valid_config_and_keeps_the_old_one_on_errors(
    tmp_path: Path,
) -> None:
    port = free_port()
    config = tmp_path / "chatbridge.yaml"
    async with FakeTelegram() as telegram, FakeOpenAI(default_text="ok") as openai:
        config.write_text(_config(telegram, openai, port, "Prompt A"))
        process = await asyncio.create_subprocess_exec(
            *CHATBRIDGE, "run", cwd=tmp_path, env=clean_env(),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            await _wait_status(f"http://127.0.0.1:{port}/readyz", 200)
            assert await _ask(telegram, openai, "eins") == "Prompt A"

            config.write_text(_config(telegram, openai, port, "Prompt B"))
            process.send_signal(signal.SIGHUP)
            await asyncio.sleep(0.5)
            assert await _ask(telegram, openai, "zwei") == "Prompt B"

            config.write_text(_config(telegram, openai, port, "Prompt C") + "bogus_key: 1\n")
            process.send_signal(signal.SIGHUP)
            await asyncio.sleep(0.5)
            assert await _ask(telegram, openai, "drei") == "Prompt B", "a broken file was applied"
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(process.communicate(), 20)
    log = err.decode()
    assert process.returncode == 0, log
    assert "reloaded the config" in log
    refused = [line for line in log.splitlines() if "reload refused" in line]
    assert refused, "the refused reload was not logged"
    assert f"{config}:" in refused[0], "the refused reload named no FILE:LINE"
    assert "bogus_key" in refused[0]
    assert "Traceback" not in log


async def test_readyz_is_503_while_draining(tmp_path: Path) -> None:
    port = free_port()
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        openai.script(Reply(text="langsam " * 40, chunk_chars=8, chunk_delay=0.05))
        (tmp_path / "chatbridge.yaml").write_text(_config(telegram, openai, port, "P"))
        process = await asyncio.create_subprocess_exec(
            *CHATBRIDGE, "run", cwd=tmp_path, env=clean_env(),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            await _wait_status(f"{base}/readyz", 200)
            assert await _status(f"{base}/healthz") == 200
            telegram.push_text(ALICE, ALICE, "Hallo")
            await telegram.wait_for(lambda: openai.open_streams == 1, within=15)
            process.send_signal(signal.SIGTERM)
            await _wait_status(f"{base}/readyz", 503, within=5)
            assert await _status(f"{base}/healthz") == 200, "liveness must stay up while draining"
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 0, err.decode()
