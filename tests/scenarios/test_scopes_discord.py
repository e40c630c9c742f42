"""Issue 20 on Discord, end to end: `chatbridge run` with scopes for a server, a
channel (only `model`), another channel (`provider: backup`, no mention
needed) and the platform. Real discord.py and openai SDK against the fakes,
the real CLI in a child process; `config explain` asks the fake for the
channel's server."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tests.scenarios.test_chemitek_discord import chatbridge_run
from tests.support.cli import clean_env, free_port, run_cli
from tests.support.fake_discord import CHANNEL_ID, GUILD_ID, THREAD_ID, USER_ID, FakeDiscord
from tests.support.fake_openai import FakeOpenAI
from tests.support.run_config import run_config_text
from tests.support.scoped_providers import main_and_backup, seen_by

pytestmark = pytest.mark.timeout(90)

SUPPORT = CHANNEL_ID + 77  # a second channel of the same server
QUIET = CHANNEL_ID + 78  # a third one, no scope of its own


def _config(discord: FakeDiscord, main: FakeOpenAI, backup: FakeOpenAI, port: int) -> str:
    return run_config_text(
        port=port,
        openai=main.base_url,
        allow=(f"discord:{USER_ID}",),
        bot={"system_prompt": "TOP PROMPT"},
        providers=main_and_backup(backup, api_key="${OPENAI_API_KEY}"),
        platforms={
            "discord": {
                "enabled": True,
                "token": "${DISCORD_BOT_TOKEN}",
                "api_base": discord.api_base,
                "gateway_url": discord.gateway_url,
                "edit_interval": "0.2s",
            }
        },
        scopes={
            f"discord:guild:{GUILD_ID}": {"system_prompt": "GUILD PROMPT"},
            f"discord:{CHANNEL_ID}": {"model": "gpt-channel"},
            f"discord:{SUPPORT}": {"provider": "backup", "require_mention": False},
            "discord": {"language": "en"},
        },
    )


async def test_scopes_on_discord_through_chatbridge_run(tmp_path: Path) -> None:
    async with (
        FakeDiscord(default_guild=False) as discord,
        FakeOpenAI(default_text="from main") as main,
        FakeOpenAI(default_text="from backup") as backup,
    ):
        channels = {CHANNEL_ID: "general", SUPPORT: "support", QUIET: "quiet"}
        discord.add_guild(GUILD_ID, "Chemitek", channels, threads={THREAD_ID: CHANNEL_ID})
        (tmp_path / "chatbridge.yaml").write_text(_config(discord, main, backup, free_port()))
        env = clean_env({"DISCORD_BOT_TOKEN": discord.token, "OPENAI_API_KEY": "sk-e2e-1"})
        dm = discord.dm_channel()
        async with chatbridge_run(tmp_path, env) as process:
            await discord.wait_for(lambda: discord.connected, within=30)
            # A channel scope setting only `model` keeps its server's prompt.
            await discord.send_guild_message("im Kanal", mention_bot=True)
            await discord.wait_for(lambda: len(main.requests) == 1, within=20)
            # A thread of that channel inherits both.
            await discord.send_guild_message("im Thread", channel_id=THREAD_ID, mention_bot=True)
            await discord.wait_for(lambda: len(main.requests) == 2, within=20)
            # A DM is in no server: top-level prompt, the default model.
            await discord.send_dm("per DM")
            await discord.wait_for(lambda: len(main.requests) == 3, within=20)
            # `provider: backup` and `require_mention: false`: no mention, only backup asked.
            await discord.send_guild_message("ohne Erwähnung", channel_id=SUPPORT)
            await discord.wait_for(lambda: len(backup.requests) == 1, within=20)
            await discord.wait_for(lambda: bool(discord.bot_texts(SUPPORT)), within=20)
            # Elsewhere a mention is still needed: this one is not answered.
            await discord.send_guild_message("nicht an dich", channel_id=QUIET)
            await discord.send_guild_message("/status", mention_bot=True)
            await discord.send_dm("/status")
            await discord.wait_for(
                lambda: any("Scope" in t for t in discord.bot_texts(dm)), within=20
            )
            await discord.wait_for(
                lambda: any("Scope" in t for t in discord.bot_texts(CHANNEL_ID)), within=20
            )
            explained = await run_cli(
                "config", "explain", "--chat", f"discord:{THREAD_ID}", cwd=tmp_path, env=env
            )
            process.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(process.communicate(), 20)

    assert process.returncode == 0, err.decode()
    requests = seen_by(main)
    assert requests[0] == ("gpt-channel", "GUILD PROMPT", "im Kanal")
    # The thread is a new session: if the channel's exchange was committed by
    # then, the same person's ring entry is bridged before the message (allowed:
    # same server), so only the message's end is fixed.
    assert requests[1][:2] == ("gpt-channel", "GUILD PROMPT")
    assert requests[1][2] == "im Thread" or requests[1][2].endswith("Current message: im Thread")
    assert requests[2] == ("gpt-main", "TOP PROMPT", "per DM")
    assert len(requests) == 3, "the backup scope's message reached main, or QUIET was answered"
    assert seen_by(backup) == [("gpt-backup", "GUILD PROMPT", "ohne Erwähnung")]
    assert discord.bot_texts(SUPPORT) == ["from backup"]
    assert discord.bot_texts(QUIET) == []
    channel_status = next(t for t in discord.bot_texts(CHANNEL_ID) if "Scope" in t)
    assert f"Scope: discord:{CHANNEL_ID}" in channel_status
    assert "gpt-channel (main)" in channel_status
    assert "Memory:" in channel_status, "the platform scope's language (en) was not applied"
    dm_status = next(t for t in discord.bot_texts(dm) if "Scope" in t)
    assert "Scope: discord\n" in dm_status
    assert "gpt-main (main)" in dm_status
    # explain finds the thread's channel and server through the API.
    assert explained.code == 0, explained.stderr
    lines = explained.stdout.splitlines()
    assert 'system_prompt: "GUILD PROMPT" (discord:guild:' + str(GUILD_ID) + ")" in lines
    assert f"model: gpt-channel (discord:{CHANNEL_ID})" in lines
    assert "language: en (discord)" in lines
    assert "session_ttl: 30m (engine.session_ttl)" in lines
