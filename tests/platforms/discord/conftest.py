"""Fixtures for the Discord adapter: the fake Discord, and a launcher that wires the
real discord.py client to the real Engine (SQLite in tmp_path, scripted provider)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chatbridge.config import DiscordConfig
from chatbridge.core.models import MemoryEntry
from chatbridge.platforms.discord import DiscordPlatform
from tests.support.fake_discord import USER_ID, FakeDiscord
from tests.support.fakes import ScriptedProvider
from tests.support.testbot import TestBot, make_testbot

ALLOWED = (f"discord:{USER_ID}",)


@dataclass
class Running:
    platform: DiscordPlatform
    bot: TestBot
    fake: FakeDiscord

    async def ring(self, user: int = USER_ID, count: int = 1) -> list[MemoryEntry]:
        """The user's ring once it holds `count` entries (committed just after the last edit)."""
        deadline = asyncio.get_running_loop().time() + 30
        while asyncio.get_running_loop().time() < deadline:
            ring = await self.bot.engine.store.ring(f"discord:{user}", since=0.0)
            if len(ring) >= count:
                return ring
            await asyncio.sleep(0.025)
        raise AssertionError(f"the ring never reached {count} entries")

    async def settled(self) -> None:
        """Every dispatch the fake sent was read by discord.py and every event
        handler it started has run: a message the bot should ignore has had
        its chance to reach the engine. (discord.py names those tasks
        "discord.py: on_<event>".)"""
        session = self.fake.session
        sent = session.seq if session is not None else 0

        def done() -> bool:
            ws = self.platform.client.ws
            handlers = [
                t for t in asyncio.all_tasks() if t.get_name().startswith("discord.py: on_")
            ]
            return ws is not None and (ws.sequence or 0) >= sent and not handlers

        await self.fake.wait_for(done, within=30)

    @property
    def prompts(self) -> list[str]:
        return [p.messages[-1].content for p in self.bot.provider.prompts]


Launch = Callable[..., Awaitable[Running]]


def discord_config(fake: FakeDiscord, **overrides: Any) -> DiscordConfig:
    values: dict[str, Any] = {
        "enabled": True,
        "token": fake.token,
        "api_base": fake.api_base,
        "gateway_url": fake.gateway_url,
        "edit_interval": 0.05,
    }
    return DiscordConfig.model_validate(values | overrides)


def echo() -> ScriptedProvider:
    return ScriptedProvider(lambda prompt: [f"echo: {prompt.messages[-1].content}"])


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@pytest.fixture
async def launch(fake: FakeDiscord, tmp_path: Path) -> AsyncIterator[Launch]:
    """Starts DiscordPlatform + Engine against `fake`; tears both down after the test."""
    started: list[Running] = []

    async def _launch(
        *, provider: ScriptedProvider | None = None, bot: TestBot | None = None, **cfg: Any
    ) -> Running:
        if bot is None:
            home = tmp_path / f"bot{len(started)}"
            home.mkdir()
            bot = await make_testbot(home, provider=provider or echo(), allow=ALLOWED)
        platform = DiscordPlatform(
            config=discord_config(fake, **cfg),
            handler=bot.engine,
            commands=bot.engine.commands,
            guild_ready_timeout=0.05,
        )
        bot.engine.attach(platform.name, platform.outbox)
        running = Running(platform, bot, fake)
        started.append(running)
        await platform.start()
        return running

    yield _launch
    for running in reversed(started):
        await running.platform.stop_receiving()
        await running.bot.engine.drain(1.0)
        await running.platform.aclose()
        await running.bot.engine.store.aclose()
