"""The seed's story on Discord, end to end: `chatbridge run` with the Discord and
OpenAI fakes. Real discord.py, real openai SDK, real SQLite, the real CLI in a
child process; and a SIGKILL after a message was dispatched."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support import inbox_file
from tests.support.chemitek import FIRST, SECOND, TRACKING, UNDERSTOOD, chemitek_model
from tests.support.cli import CHATBRIDGE, clean_env, free_port
from tests.support.fake_discord import USER_ID, FakeDiscord
from tests.support.fake_openai import FakeOpenAI
from tests.support.run_config import run_config_text
from tests.support.sse import Reply
from tests.support.story_run import remembered, stopped

pytestmark = pytest.mark.timeout(60)

STRANGER = USER_ID + 500


def _config(discord: FakeDiscord, openai: FakeOpenAI, port: int) -> str:
    return run_config_text(
        port=port,
        openai=openai.base_url,
        allow=(f"discord:{USER_ID}",),
        engine={"session_ttl": "1s"},
        providers={"main": {"api_key": "${OPENAI_API_KEY}"}},
        platforms={
            "discord": {
                "enabled": True,
                "token": "${DISCORD_BOT_TOKEN}",
                "api_base": discord.api_base,
                "gateway_url": discord.gateway_url,
                "edit_interval": "0.2s",
            }
        },
    )


@contextlib.asynccontextmanager
async def chatbridge_run(
    tmp_path: Path, env: dict[str, str]
) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        *CHATBRIDGE, "run", cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        yield process
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


async def _connected(fake: FakeDiscord, identifies: int) -> None:
    await fake.wait_for(lambda: fake.identify_count >= identifies and fake.connected, within=30)


async def test_chemitek_story_through_chatbridge_run(tmp_path: Path) -> None:
    async with FakeDiscord() as discord, FakeOpenAI(chunk_chars=12) as openai:
        openai.script(Reply(text=chemitek_model), Reply(text=chemitek_model))
        (tmp_path / "chatbridge.yaml").write_text(_config(discord, openai, free_port()))
        env = clean_env({"DISCORD_BOT_TOKEN": discord.token, "OPENAI_API_KEY": "sk-e2e-9876"})
        dm = discord.dm_channel()
        async with chatbridge_run(tmp_path, env) as process:
            await _connected(discord, 1)
            await discord.send_dm("Hallo?", author=STRANGER)
            stranger_dm = discord.dm_channel(STRANGER)
            await discord.wait_for(lambda: bool(discord.bot_texts(stranger_dm)), within=20)

            await discord.send_dm(FIRST)
            await discord.wait_for(lambda: any("09.04." in t for t in discord.bot_texts(dm)), 20)
            await asyncio.sleep(1.5)  # the 1 s session expires
            await discord.send_dm(SECOND)
            await discord.wait_for(lambda: UNDERSTOOD in discord.bot_texts(dm), within=20)
            memory = await remembered(tmp_path, env, f"discord:{USER_ID}", discord.wait_for)
            ran = await stopped(process)

    ran.assert_clean(discord.token)
    assert memory == [FIRST, SECOND]
    denial = discord.bot_texts(stranger_dm)
    assert len(denial) == 1
    assert f"discord:{STRANGER}" in denial[0]
    assert "access.allow" in denial[0]
    assert len(openai.requests) == 2, "the stranger's message never reached the provider"
    assert discord.bot_texts(dm) == [TRACKING, UNDERSTOOD]
    bridged = openai.requests[1].body["messages"][-1]["content"]
    assert bridged.startswith("<conversation_history>")
    assert bridged.endswith(f"Aktuelle Nachricht: {SECOND}")
    assert discord.calls_to("PUT /applications/*/commands")
    assert dm in discord.typing


async def test_a_message_dispatched_before_sigkill_is_answered_after_restart(
    tmp_path: Path,
) -> None:
    answer = "Das Paket kommt am Mittwoch."
    async with FakeDiscord() as discord, FakeOpenAI(chunk_chars=8) as openai:
        # The first model call never finishes before the kill; the restart's call answers.
        openai.script(Reply(text="zu spät", first_chunk_delay=30), Reply(text=answer))
        (tmp_path / "chatbridge.yaml").write_text(_config(discord, openai, free_port()))
        env = clean_env({"DISCORD_BOT_TOKEN": discord.token, "OPENAI_API_KEY": "sk-e2e-9876"})
        dm = discord.dm_channel()
        db = tmp_path / "data" / "chatbridge.db"  # the default memory.path, beside the config
        async with chatbridge_run(tmp_path, env) as first:
            await _connected(discord, 1)
            await discord.send_dm(FIRST)
            await discord.wait_for(lambda: len(openai.requests) == 1, within=20)
            first.send_signal(signal.SIGKILL)
            await first.wait()
        assert discord.bot_texts(dm) == []
        async with chatbridge_run(tmp_path, env) as second:
            await discord.wait_for(
                lambda: answer in discord.bot_texts(dm) and inbox_file.pending(db) == 0, within=30
            )  # with nothing pending, nothing else can arrive
            second.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(second.communicate(), 20)
    assert second.returncode == 0, err.decode()
    assert discord.bot_texts(dm) == [answer], "answered not exactly once"
    assert [r.body["messages"][-1]["content"] for r in openai.requests][-1].endswith(FIRST)
    assert len(discord.command_syncs) == 1, "the restart synced unchanged commands again"
