"""`chatbridge run` as an admin meets it: start-up errors, webhooks, graceful stop."""

from __future__ import annotations

import asyncio
import signal
import socket
from pathlib import Path

import aiohttp

from tests.support import inbox_file
from tests.support.cli import CHATBRIDGE, clean_env, free_port, run_cli
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_telegram import FakeTelegram
from tests.support.people import ALICE
from tests.support.run_config import write_run_config
from tests.support.sse import Reply


def _config(
    directory: Path,
    telegram: FakeTelegram,
    openai: FakeOpenAI,
    port: int,
    telegram_options: dict[str, str] | None = None,
) -> None:
    write_run_config(
        directory,
        port=port,
        telegram=telegram.base_url,
        openai=openai.base_url,
        engine={"shutdown_grace": "10s"},
        platforms={"telegram": telegram_options or {}},
    )


async def _start(tmp_path: Path, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", cwd=tmp_path, env=clean_env(env),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def test_run_without_any_platform_says_so(tmp_path: Path) -> None:
    result = await run_cli("run", cwd=tmp_path)
    assert result.code == 2
    assert "no platform is enabled" in result.stderr
    assert "Traceback" not in result.stderr


async def test_a_rejected_token_is_one_sentence_without_the_token(tmp_path: Path) -> None:
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        _config(tmp_path, telegram, openai, free_port())
        env = {"TELEGRAM_BOT_TOKEN": "123:this-token-is-wrong"}
        result = await run_cli("run", cwd=tmp_path, env=env)
    output = result.stdout + result.stderr
    assert result.code == 1
    # PlatformStartFailed: one sentence that names the setting to fix.
    last_line = result.stderr.strip().splitlines()[-1]
    assert "telegram rejected the bot token" in last_line
    assert "platforms.telegram.token" in last_line
    assert "this-token-is-wrong" not in output
    assert "Traceback" not in output


async def test_sigterm_lets_the_reply_in_flight_finish(tmp_path: Path) -> None:
    answer = "Das Chemitek-Paket kommt am Mittwoch. " * 8
    async with FakeTelegram() as telegram, FakeOpenAI() as openai:
        openai.script(Reply(text=answer, chunk_chars=20, chunk_delay=0.1))
        _config(tmp_path, telegram, openai, free_port())
        process = await _start(tmp_path, {"TELEGRAM_BOT_TOKEN": telegram.token})
        telegram.push_text(ALICE, ALICE, "Wann kommt das Paket?")
        await telegram.wait_for(lambda: openai.open_streams == 1, within=30)
        process.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(process.communicate(), 30)
        transcript = telegram.bot_texts(ALICE)

    assert process.returncode == 0, err.decode()
    assert transcript == [answer.strip()], "the answer in flight was cut off"
    env = {"TELEGRAM_BOT_TOKEN": "x"}  # the config names it, even for `memory show`
    show = await run_cli("memory", "show", "--user", f"telegram:{ALICE}", cwd=tmp_path, env=env)
    assert "Wann kommt das Paket?" in show.stdout, "the finished exchange was not stored"


async def test_webhook_mode_through_chatbridge_run(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/telegram/webhook"
    webhook = {"mode": "webhook", "webhook_url": url, "webhook_secret": "s3cret-Token"}
    db = tmp_path / "data" / "chatbridge.db"  # the default memory.path, beside the config
    async with FakeTelegram() as telegram, FakeOpenAI(default_text="Hallo zurück") as openai:
        _config(tmp_path, telegram, openai, port, webhook)
        process = await _start(tmp_path, {"TELEGRAM_BOT_TOKEN": telegram.token})
        try:
            await telegram.wait_for(lambda: bool(telegram.webhook), within=30)
            forged = telegram.make_update(ALICE, ALICE, "gefälscht")
            assert await telegram.post_webhook(url, forged, secret="wrong") == 403
            assert await telegram.post_webhook(url, forged, secret=None) == 403
            base = f"http://127.0.0.1:{port}"
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{base}/readyz") as response:
                    assert response.status == 200, await response.text()
                update = telegram.make_update(ALICE, ALICE, "Hallo")
                assert await telegram.post_webhook(url, update, secret="s3cret-Token") == 200
                assert await telegram.post_webhook(url, update, secret="s3cret-Token") == 200
                # The inbox recognised the redelivery before that second 200.
                async with http.get(f"{base}/metrics") as response:
                    early = await response.text()
                assert 'outcome="duplicate",platform="telegram",scope="default"} 1.0' in early
                await telegram.wait_for(lambda: "Hallo zurück" in telegram.bot_texts(ALICE))
                async with http.get(f"{base}/healthz") as response:
                    assert response.status == 200
                metrics = ""
                deadline = asyncio.get_running_loop().time() + 30
                # The answer is counted once its delivery is done; with nothing
                # left in the inbox, a second answer could not come any more.
                while 'outcome="answered"' not in metrics or inbox_file.pending(db):
                    assert asyncio.get_running_loop().time() < deadline, metrics
                    await asyncio.sleep(0.05)
                    async with http.get(f"{base}/metrics") as response:
                        metrics = await response.text()
        finally:
            process.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 0, err.decode()
    assert telegram.webhook["url"] == url
    assert telegram.bot_texts(ALICE) == ["Hallo zurück"], "redelivery answered twice"
    answered = 'outcome="answered",platform="telegram",scope="default"'
    assert f"chatbridge_messages_total{{{answered}}} 1.0" in metrics
    assert 'outcome="duplicate",platform="telegram",scope="default"} 1.0' in metrics
    assert [r.body["messages"][-1]["content"] for r in openai.requests] == ["Hallo"]


async def test_a_port_in_use_is_one_sentence(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with FakeTelegram() as telegram, FakeOpenAI() as openai:
            _config(tmp_path, telegram, openai, port)
            result = await run_cli("run", cwd=tmp_path, env={"TELEGRAM_BOT_TOKEN": telegram.token})
    assert result.code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
    assert telegram.token not in result.stderr
