"""Fixtures for the Telegram adapter tests: the fake Bot API and a handler stand-in.

`StandInEngine` (a fake of our own `MessageHandler` Protocol) exists only so
the adapter can be tested on its own; `test_telegram_engine.py` and the
scenario tests drive the real engine.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import pytest
from aiohttp import web

from chatbridge.config import TelegramConfig
from chatbridge.core.app.webhooks import mount
from chatbridge.core.engine import Engine
from chatbridge.core.models import IncomingMessage
from chatbridge.platforms.base import Outbox
from chatbridge.platforms.telegram import TelegramPlatform
from tests.support.fake_telegram import FakeTelegram

Reply = Callable[[IncomingMessage, Outbox], Coroutine[Any, Any, None]]
Launch = Callable[..., Awaitable[TelegramPlatform]]
WEBHOOK_SECRET = "s3cret_Token-1"


async def echo(message: IncomingMessage, outbox: Outbox) -> None:
    await outbox.typing()
    await outbox.send(f"echo: {message.text}")


class StandInEngine:
    """A `MessageHandler` that records every message and answers with `reply`
    (echo by default) through the platform's own outbox, as the engine does."""

    def __init__(self, reply: Reply = echo) -> None:
        self.commands: tuple[tuple[str, str], ...] = (
            ("help", "Show help"),
            ("new", "Fresh session"),
        )
        self.handled: list[IncomingMessage] = []
        self.reply = reply
        self.outboxes: Callable[[IncomingMessage], Outbox] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def attach(self, platform: str, outboxes: Callable[[IncomingMessage], Outbox]) -> None:
        self.outboxes = outboxes

    async def accept(self, message: IncomingMessage) -> bool:
        assert self.outboxes is not None, "attach() was not called"
        self.handled.append(message)
        task = asyncio.create_task(self.reply(message, self.outboxes(message)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def drain(self) -> None:
        """Waits for every answer in flight, as `Engine.drain` does at shutdown."""
        while self._tasks:
            await asyncio.gather(*self._tasks)

    def texts(self) -> list[str]:
        return [m.text for m in self.handled]


def telegram_config(fake: FakeTelegram, **overrides: Any) -> TelegramConfig:
    """A real, validated `platforms.telegram` section pointed at `fake`."""
    values: dict[str, Any] = {
        "enabled": True,
        "token": fake.token,
        "mode": "polling",
        "base_url": fake.base_url,
        "edit_interval": 0.0,
    }
    return TelegramConfig.model_validate(values | overrides)


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


@pytest.fixture
def engine() -> StandInEngine:
    return StandInEngine()


@pytest.fixture
async def launch(fake: FakeTelegram, engine: StandInEngine) -> AsyncIterator[Launch]:
    """Builds and starts a platform against `fake`; closes it after the test."""
    started: list[TelegramPlatform] = []

    async def _launch(
        *,
        engine: StandInEngine | Engine = engine,
        server: web.Application | None = None,
        **cfg: Any,
    ) -> TelegramPlatform:
        platform = TelegramPlatform(
            config=telegram_config(fake, **cfg),
            handler=engine,
            commands=engine.commands,
        )
        if server is not None:
            mount(server, platform.routes)
        engine.attach(platform.name, platform.outbox)
        started.append(platform)
        await platform.start()
        return platform

    yield _launch
    for platform in reversed(started):
        await platform.aclose()
