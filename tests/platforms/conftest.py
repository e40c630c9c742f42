"""Fixtures for the Telegram adapter tests: the fake Bot API and an engine stand-in.

`StandInEngine` exists only so the adapter can be tested on its own; the
scenario tests drive the real engine.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import SecretStr

from core.models import IncomingMessage
from platforms.base import Outbox
from platforms.telegram import TelegramPlatform
from tests.support.fake_telegram import FakeTelegram

Reply = Callable[[IncomingMessage, Outbox], Awaitable[None]]
Launch = Callable[..., Awaitable[TelegramPlatform]]
WEBHOOK_SECRET = "s3cret_Token-1"


async def echo(message: IncomingMessage, outbox: Outbox) -> None:
    await outbox.typing()
    await outbox.send(f"echo: {message.text}")


class StandInEngine:
    """Records every message that reaches it and answers with `reply` (echo by default)."""

    def __init__(self, reply: Reply = echo) -> None:
        self.commands: list[tuple[str, str]] = [("help", "Show help"), ("new", "Fresh session")]
        self.handled: list[IncomingMessage] = []
        self.reply = reply

    async def handle(self, message: IncomingMessage, outbox: Outbox) -> None:
        self.handled.append(message)
        await self.reply(message, outbox)

    def texts(self) -> list[str]:
        return [m.text for m in self.handled]


def telegram_config(fake: FakeTelegram, **overrides: Any) -> SimpleNamespace:
    """Duck-typed like `config.TelegramConfig`, secrets as `SecretStr`."""
    values: dict[str, Any] = {
        "token": SecretStr(fake.token),
        "mode": "polling",
        "base_url": fake.base_url,
        "webhook_url": "",
        "webhook_secret": None,
        "edit_interval": 0.0,
    }
    return SimpleNamespace(**(values | overrides))


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

    async def _launch(*, engine: StandInEngine = engine, **cfg: Any) -> TelegramPlatform:
        platform = TelegramPlatform(config=telegram_config(fake, **cfg), engine=engine)
        started.append(platform)
        await platform.start()
        return platform

    yield _launch
    for platform in reversed(started):
        await platform.aclose()
