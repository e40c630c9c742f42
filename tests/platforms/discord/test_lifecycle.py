"""Start-up failures as one sentence, readiness, gateway drops, shards."""

from __future__ import annotations

import asyncio
import logging

import pytest
from discord import AutoShardedClient

from chatbridge.core.ports import PlatformStartFailed
from chatbridge.platforms.discord import INTENT_MISSING, TOKEN_REJECTED, DiscordPlatform
from tests.platforms.discord.conftest import Launch, discord_config
from tests.support.fake_discord import FakeDiscord
from tests.support.fake_discord_gateway import MESSAGE_CONTENT, PRIVILEGED_INTENTS


class NoEngine:
    async def accept(self, message: object) -> bool:
        raise AssertionError("nothing should reach the engine")


async def test_a_rejected_token_is_one_sentence_without_the_token(fake: FakeDiscord) -> None:
    platform = DiscordPlatform(
        config=discord_config(fake, token="wrong.token.value"), handler=NoEngine()
    )
    with pytest.raises(PlatformStartFailed) as caught:
        await platform.start()
    await platform.aclose()  # safe after a failed start
    assert str(caught.value) == TOKEN_REJECTED
    assert "wrong.token" not in str(caught.value)
    assert not platform.connected


async def test_a_missing_message_content_intent_tells_the_admin_where_to_switch_it_on() -> None:
    async with FakeDiscord(granted_intents=PRIVILEGED_INTENTS & ~MESSAGE_CONTENT) as fake:
        platform = DiscordPlatform(config=discord_config(fake), handler=NoEngine())
        with pytest.raises(PlatformStartFailed) as caught:
            await platform.start()
        assert str(caught.value) == INTENT_MISSING
        assert 4014 in fake.close_codes


async def test_after_a_gateway_drop_it_resumes_and_answers_the_next_message(
    fake: FakeDiscord, launch: Launch
) -> None:
    running = await launch()
    assert running.platform.connected
    await fake.drop_connection()
    await fake.wait_for(lambda: fake.resume_count == 1 and fake.connected, within=10)
    await fake.send_dm("Noch da?")
    await fake.wait_for(lambda: bool(fake.bot_texts(fake.dm_channel())))
    assert fake.bot_texts(fake.dm_channel()) == ["echo: Noch da?"]
    assert fake.identify_count == 1, "it identified again instead of resuming"
    assert running.platform.connected


async def test_stop_receiving_turns_readiness_off_and_ignores_new_messages(
    fake: FakeDiscord, launch: Launch
) -> None:
    running = await launch()
    await running.platform.stop_receiving()
    assert not running.platform.connected
    await fake.send_dm("zu spät")
    await fake.send_dm("auch zu spät")
    await running.settled()
    await running.bot.engine.drain(5.0)
    assert running.prompts == []
    assert fake.bot_texts(fake.dm_channel()) == []


async def test_shard_settings_run_an_auto_sharded_client(fake: FakeDiscord, launch: Launch) -> None:
    running = await launch(shard_count=1, shard_ids=[0])
    assert isinstance(running.platform.client, AutoShardedClient)
    identify = [c for c in fake.gateway_log if c.path == "IDENTIFY"]
    assert identify[-1].body["shard"] == [0, 1]
    await fake.send_dm("DMs kommen auf Shard 0")
    await fake.wait_for(lambda: bool(fake.bot_texts(fake.dm_channel())))


async def test_a_gateway_that_ends_after_ready_is_logged_once_and_its_task_awaited_on_stop(
    fake: FakeDiscord, launch: Launch, caplog: pytest.LogCaptureFixture
) -> None:
    """Discord closes the session with 4004 (the token was reset while the bot
    ran): discord.py gives up, and the adapter says so once instead of losing
    the gateway task's exception; `aclose` leaves none of its tasks running."""
    caplog.set_level(logging.ERROR, logger="chatbridge.platforms")
    before = asyncio.all_tasks()
    running = await launch()
    await fake.close_gateway(4004, "Authentication failed")

    def stopped() -> list[str]:
        return [r.getMessage() for r in caplog.records if "gateway stopped" in r.getMessage()]

    await fake.wait_for(stopped)
    assert not running.platform.connected
    await running.platform.stop_receiving()
    await running.platform.aclose()
    [line] = stopped()
    assert "ConnectionClosed" in line
    assert "4004" in line
    assert fake.token not in line
    left = [t.get_name() for t in asyncio.all_tasks() - before if not t.done()]
    assert [n for n in left if n.startswith("discord:")] == []


async def test_stopping_cancels_and_awaits_the_live_gateway_without_calling_it_a_failure(
    fake: FakeDiscord, launch: Launch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="chatbridge.platforms")
    before = asyncio.all_tasks()
    running = await launch()
    assert fake.connected
    await running.platform.stop_receiving()
    await running.platform.aclose()
    left = [t.get_name() for t in asyncio.all_tasks() - before if not t.done()]
    assert [n for n in left if n.startswith("discord:")] == []
    assert [r.getMessage() for r in caplog.records if r.name.startswith("chatbridge")] == []
