"""Fixtures for the Slack adapter: the fake Slack, the real engine, a launcher.

`launch(mode=…)` wires what `chatbridge run` wires, in-process: the real
`Engine` (SQLite under tmp_path, a scripted provider), a `SlackPlatform` built
from a real `SlackConfig`, chatbridge's aiohttp server on port 0 (HTTP mode),
`engine.attach`, `platform.start()`. Everything is closed after the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from chatbridge.config import SlackConfig
from chatbridge.core.app.webhooks import mount
from chatbridge.platforms.slack import EVENTS_PATH, SlackPlatform
from tests.support import fake_slack_events as ev
from tests.support.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.support.fakes import ScriptedProvider
from tests.support.testbot import TestBot, make_testbot

SECRET = "slack-signing-secret-for-tests"
ALLOWED = (f"slack:{ev.USER_ID}",)


@dataclass
class Running:
    """A started platform and what a test drives it with."""

    platform: SlackPlatform
    bot: TestBot
    fake: FakeSlack
    url: str = ""  # the HTTP events URL (HTTP mode)

    async def event(self, event: dict[str, Any], **options: Any) -> Any:
        """Deliver `event` in the platform's mode; returns the Delivery / (status, body, s)."""
        if self.platform.socket_mode:
            return await self.fake.socket_event(event, **options)
        retry = options.pop("retry_attempt", None)
        if retry:
            options["retry_num"] = retry
        return await self.fake.post_event(self.url, event, signing_secret=SECRET, **options)


Launch = Callable[..., Awaitable[Running]]


def slack_config(fake: FakeSlack, *, mode: str = "socket", **overrides: Any) -> SlackConfig:
    values: dict[str, Any] = {
        "enabled": True,
        "bot_token": BOT_TOKEN,
        "base_url": fake.base_url,
        "edit_interval": 0.05,
    }
    values |= {"app_token": APP_TOKEN} if mode == "socket" else {"signing_secret": SECRET}
    return SlackConfig.model_validate(values | overrides)


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as server:
        yield server


@pytest.fixture
async def launch(fake: FakeSlack, tmp_path: Path) -> AsyncIterator[Launch]:
    started: list[tuple[SlackPlatform, TestBot, web.AppRunner]] = []

    async def _launch(
        *, mode: str = "socket", provider: ScriptedProvider | None = None, **cfg: Any
    ) -> Running:
        bot = await make_testbot(tmp_path / f"bot{len(started)}", provider=provider, allow=ALLOWED)
        server = web.Application()
        platform = SlackPlatform(
            config=slack_config(fake, mode=mode, **cfg),
            handler=bot.engine,
        )
        mount(server, platform.routes)
        runner = web.AppRunner(server, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        started.append((platform, bot, runner))
        bot.engine.attach(platform.name, platform.outbox)
        await platform.start()
        port = runner.addresses[0][1]
        return Running(platform, bot, fake, f"http://127.0.0.1:{port}{EVENTS_PATH}")

    yield _launch
    for platform, bot, runner in reversed(started):
        await platform.aclose()
        await bot.engine.drain(1.0)
        await runner.cleanup()
        await bot.engine.store.aclose()
